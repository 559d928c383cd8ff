//! The engine's clients as the admin sees them (`CLIENT LIST`, `CLIENT INFO`, `CLIENT KILL`):
//! apart from the per-node fan-out in the parent, because gates ask it who is connected (the
//! connector's clients, the harness's own) and which connection to kill.

use std::collections::BTreeSet;

use redis::Value;

use super::{Admin, command, err};
use crate::error::HarnessError;

/// One line of `CLIENT LIST`.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    /// The node it is a client of (an index into [`Admin::nodes`]; 0 on a single engine).
    pub node: usize,
    pub id: u64,
    pub addr: String,
    /// The node's own address the client connected to (`laddr`).
    pub laddr: String,
    pub db: u32,
    /// The ACL user it is authenticated as (`default` until its `AUTH`).
    pub user: String,
    pub name: String,
    pub cmd: String,
    pub tot_net_in: u64,
}

impl Admin {
    /// This connection's client id.
    pub fn client_id(&mut self) -> Result<u64, HarnessError> {
        self.query(&["CLIENT", "ID"])
    }

    /// The addresses of this admin's own connections as each primary sees them, in shard order
    /// (one entry on a single engine). Per node, because two nodes may each see a client at the
    /// same address: a connection's local port is unique per destination only, so the harness's
    /// connection to one node and a connector's to another can share it.
    pub fn own_addrs_by_node(&mut self) -> Result<Vec<BTreeSet<String>>, HarnessError> {
        let seed = parse_client(self.query::<String>(&["CLIENT", "INFO"])?.trim());
        if self.shards.is_empty() {
            return Ok(vec![BTreeSet::from([seed.addr])]);
        }
        let each: Vec<String> = self.query_each(&["CLIENT", "INFO"])?;
        Ok(each
            .iter()
            .map(|t| {
                let c = parse_client(t.trim());
                let mut own = BTreeSet::from([c.addr]);
                if !seed.laddr.is_empty() && seed.laddr == c.laddr {
                    own.insert(seed.addr.clone());
                }
                own
            })
            .collect())
    }

    /// Every client of the engine (of every primary of a cluster, each tagged with its node).
    pub fn client_list(&mut self) -> Result<Vec<ClientInfo>, HarnessError> {
        let texts: Vec<String> = self.query_each(&["CLIENT", "LIST"])?;
        Ok(texts
            .iter()
            .enumerate()
            .flat_map(|(node, text)| {
                text.lines().map(move |l| ClientInfo {
                    node,
                    ..parse_client(l)
                })
            })
            .collect())
    }

    /// The ACL user this admin's connections are authenticated as (`default` where its url
    /// names none).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Kills one client connection (crash injection), on the node it is a client of.
    pub fn client_kill(&mut self, client: &ClientInfo) -> Result<(), HarnessError> {
        let c = command(&["CLIENT", "KILL", "ID", &client.id.to_string()]);
        let con = match self.shards.get_mut(client.node) {
            Some(s) => &mut s.con,
            None => &mut self.con,
        };
        let _: Value = c.query(con).map_err(err)?;
        Ok(())
    }
}

pub(super) fn parse_client(line: &str) -> ClientInfo {
    let mut c = ClientInfo::default();
    for field in line.split(' ') {
        let Some((k, v)) = field.split_once('=') else {
            continue;
        };
        match k {
            "id" => c.id = v.parse().unwrap_or(0),
            "addr" => c.addr = v.to_string(),
            "laddr" => c.laddr = v.to_string(),
            "db" => c.db = v.parse().unwrap_or(0),
            "user" => c.user = v.to_string(),
            "name" => c.name = v.to_string(),
            "cmd" => c.cmd = v.to_string(),
            "tot-net-in" => c.tot_net_in = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    c
}
