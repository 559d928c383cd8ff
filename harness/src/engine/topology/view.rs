//! What the engine says of its nodes, parsed: a node's id, its role, one line of
//! `CLUSTER NODES`. Pure, so that the cluster's boot, the health baseline and the topology's
//! queries read the engine's words (`master`, `slave`) in one place.

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

/// What a node is to its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Primary,
    Replica,
}

impl Role {
    /// From a `CLUSTER NODES` line's flags (`myself,master`, `slave`, `master,fail?`).
    pub fn from_flags(flags: &str) -> Role {
        if flags.split(',').any(|f| f == "master") {
            Role::Primary
        } else {
            Role::Replica
        }
    }

    /// From `INFO replication`'s `role` field; `None` when it names neither.
    pub fn from_info(info: &BTreeMap<String, String>) -> Option<Role> {
        match info.get("role").map(String::as_str) {
            Some("master") => Some(Role::Primary),
            Some("slave") => Some(Role::Replica),
            _ => None,
        }
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
}
