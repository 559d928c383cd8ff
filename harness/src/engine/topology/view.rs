//! What the engine says of its nodes, parsed: a node's id, its role, one line of
//! `CLUSTER NODES`, one entry of a Sentinel's `SENTINEL replicas` / `SENTINEL sentinels`. Pure,
//! so that the boots, the health baseline and the topology's queries read the engine's words
//! (`master`, `slave`) in one place.

use std::collections::BTreeMap;
use std::fmt;

/// A node of the engine, by its place in boot order. A single engine is one node, `NodeId(0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(usize);

impl NodeId {
    pub(crate) fn new(index: usize) -> Self {
        Self(index)
    }

    /// The node's place in boot order.
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.0)
    }
}

/// A Sentinel of a Sentinel engine, by its place in boot order: not a data node, so never a
/// [`NodeId`] (a gate that kills "node 0" means a server that holds keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SentinelId(usize);

impl SentinelId {
    pub(crate) fn new(index: usize) -> Self {
        Self(index)
    }

    /// The Sentinel's place in boot order.
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for SentinelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sentinel {}", self.0)
    }
}

/// One entry of `SENTINEL replicas <name>` or `SENTINEL sentinels <name>` (a map of fields), as
/// far as the harness cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelEntry {
    /// The port it is known at (the one it announces).
    pub port: Option<u16>,
    /// The role its flags give (`slave`, `master`); `None` for a Sentinel.
    pub role: Option<Role>,
    /// Flagged down or unreachable: `s_down`, `o_down` or `disconnected`.
    pub down: bool,
    /// A replica's primary, as it reports it (`master-port`).
    pub primary_port: Option<u16>,
    /// A replica's `replica-priority` as the Sentinel last read it (`slave-priority`; 0: never
    /// promoted).
    pub priority: Option<u32>,
}

/// Parses one entry of `SENTINEL replicas` / `SENTINEL sentinels`.
pub fn parse_sentinel_entry(fields: &BTreeMap<String, String>) -> SentinelEntry {
    let flags: Vec<&str> = fields
        .get("flags")
        .map_or(Vec::new(), |f| f.split(',').collect());
    let port = |k: &str| fields.get(k).and_then(|p| p.parse().ok());
    SentinelEntry {
        port: port("port"),
        role: flags.iter().find_map(|f| Role::from_word(f)),
        down: flags
            .iter()
            .any(|f| matches!(*f, "s_down" | "o_down" | "disconnected")),
        primary_port: port("master-port"),
        priority: fields.get("slave-priority").and_then(|p| p.parse().ok()),
    }
}

/// The ports of the replicas a primary's `INFO replication` lists (`slave0:ip=…,port=…,…`), in
/// its order: the ports they announce.
pub fn replica_ports(info: &BTreeMap<String, String>) -> Vec<u16> {
    (0..)
        .map_while(|i| info.get(&format!("slave{i}")))
        .filter_map(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("port="))
                .and_then(|p| p.parse().ok())
        })
        .collect()
}

/// The port of the primary a replica's `INFO replication` follows with its link up
/// (`master_port`, the port it was told: a proxy's on a Sentinel engine); `None` on a primary,
/// or with the link down.
pub fn following_port(info: &BTreeMap<String, String>) -> Option<u16> {
    let up = info.get("master_link_status").map(String::as_str) == Some("up");
    (Role::from_info(info) == Some(Role::Replica) && up)
        .then(|| info.get("master_port")?.parse().ok())
        .flatten()
}

/// What a node is to its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Primary,
    Replica,
}

impl Role {
    /// The engine's word for a role (`master`, `slave`: `INFO`, `ROLE`, `CLUSTER NODES`' flags,
    /// Sentinel's flags); `None` for any other word. The only place the engine's words are read.
    pub fn from_word(word: &str) -> Option<Role> {
        [Role::Primary, Role::Replica]
            .into_iter()
            .find(|r| r.word() == word)
    }

    /// The engine's word for it, the one place those words are written (unit tests write
    /// engine replies with it).
    pub fn word(self) -> &'static str {
        match self {
            Role::Primary => "master",
            Role::Replica => "slave",
        }
    }

    /// From a `CLUSTER NODES` line's flags (`myself,master`, `slave`, `master,fail?`).
    pub fn from_flags(flags: &str) -> Role {
        if flags
            .split(',')
            .any(|f| Role::from_word(f) == Some(Role::Primary))
        {
            Role::Primary
        } else {
            Role::Replica
        }
    }

    /// From `INFO replication`'s `role` field; `None` when it names neither.
    pub fn from_info(info: &BTreeMap<String, String>) -> Option<Role> {
        Role::from_word(info.get("role")?)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        })
    }
}

/// One line of `CLUSTER NODES`, as far as a verdict cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// `host:port`, the bus port cut off.
    pub addr: String,
    pub role: Role,
    /// The slot ranges it serves, as listed (`0-5460`).
    pub slots: Vec<String>,
    /// Flagged `fail` or `fail?` (PFAIL).
    pub failing: bool,
}

impl NodeView {
    /// The port of its address.
    pub fn port(&self) -> Option<u16> {
        port_of_addr(&self.addr)
    }
}

/// The port of a node address as the engine writes it (`127.0.0.1:7000@17000`, `localhost:7000`).
pub fn port_of_addr(addr: &str) -> Option<u16> {
    addr.split('@').next()?.rsplit_once(':')?.1.parse().ok()
}

/// Parses `CLUSTER NODES` text: node id → its view.
pub fn parse_nodes(text: &str) -> BTreeMap<String, NodeView> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            Some((
                f[0].to_string(),
                NodeView {
                    addr: f[1].split('@').next().unwrap_or("").to_string(),
                    role: Role::from_flags(f[2]),
                    // Slots being imported/migrated (`[1-<-id]`) are listed too: they are changes.
                    slots: f[8..].iter().map(|s| s.to_string()).collect(),
                    failing: f[2].split(',').any(|x| x == "fail" || x == "fail?"),
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_ports_are_read_from_the_engines_words() {
        let text = "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
                    d4 localhost:7003@17003 slave,fail? a1 0 0 1 connected\n\
                    short line\n";
        let v = parse_nodes(text);
        assert_eq!(v.len(), 2);
        assert_eq!(v["a1"].role, Role::Primary);
        assert_eq!(v["a1"].port(), Some(7000));
        assert_eq!(v["a1"].slots, ["0-5460"]);
        assert!(!v["a1"].failing);
        assert_eq!(v["d4"].role, Role::Replica);
        assert_eq!(v["d4"].port(), Some(7003));
        assert!(v["d4"].failing);
        assert_eq!(port_of_addr("127.0.0.1:7001@17001"), Some(7001));
        assert_eq!(port_of_addr("?"), None);
        let info = |r: &str| BTreeMap::from([("role".to_string(), r.to_string())]);
        assert_eq!(Role::from_info(&info("master")), Some(Role::Primary));
        assert_eq!(Role::from_info(&info("slave")), Some(Role::Replica));
        assert_eq!(Role::from_info(&info("sentinel")), None);
        assert_eq!(Role::Replica.to_string(), "replica");
    }

    #[test]
    fn sentinel_entries_give_port_role_down_primary_and_priority() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let replica = map(&[
            ("name", "127.0.0.1:7001"),
            ("port", "7001"),
            ("flags", "slave"),
            ("master-port", "7000"),
            ("slave-priority", "0"),
        ]);
        let e = parse_sentinel_entry(&replica);
        assert_eq!(
            e,
            SentinelEntry {
                port: Some(7001),
                role: Some(Role::Replica),
                down: false,
                primary_port: Some(7000),
                priority: Some(0),
            }
        );
        let gone = map(&[("port", "7000"), ("flags", "s_down,slave,disconnected")]);
        assert!(parse_sentinel_entry(&gone).down);
        let peer = map(&[("port", "26379"), ("flags", "sentinel")]);
        let p = parse_sentinel_entry(&peer);
        assert_eq!((p.port, p.role, p.down), (Some(26379), None, false));
        assert_eq!(parse_sentinel_entry(&map(&[])).port, None);
        assert_eq!(SentinelId::new(2).to_string(), "sentinel 2");
        let info = map(&[
            ("role", "master"),
            (
                "slave0",
                "ip=127.0.0.1,port=7001,state=online,offset=42,lag=0",
            ),
            (
                "slave1",
                "ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0",
            ),
        ]);
        assert_eq!(replica_ports(&info), [7001, 7002]);
        assert!(replica_ports(&map(&[("role", "slave")])).is_empty());
        let replica = |link: &str| {
            map(&[
                ("role", "slave"),
                ("master_port", "7000"),
                ("master_link_status", link),
            ])
        };
        assert_eq!(following_port(&replica("up")), Some(7000));
        assert_eq!(following_port(&replica("down")), None);
        assert_eq!(following_port(&info), None);
    }
}
