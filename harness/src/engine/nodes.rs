//! A cluster node's process, for G8's unclean failover (SPEC R8.10): killed (SIGKILL), stopped
//! and woken (SIGSTOP, SIGCONT), restarted on its port and directory so that it rejoins as a
//! replica; the cluster's failure detection tuned for a scenario and restored after; and a node's
//! replication position, read on a side connection.

use rustix::process::Signal;

pub use crate::engine::admin::side::{ReplPosition, SideReader, parse_position};
use crate::engine::{Engine, Handle, binary, cluster};
use crate::error::HarnessError;
use crate::faults::Proxy;

/// What a promoted replica took over (`INFO replication` on the new primary): the old primary's
/// history (`master_replid2`) up to `second_repl_offset - 1`, and its own new history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeOver {
    pub replid: String,
    pub replid2: String,
    pub second_repl_offset: u64,
}

/// `INFO replication` fields as a map (the admin's parsing).
fn field(
    info: &std::collections::BTreeMap<String, String>,
    k: &str,
) -> Result<String, HarnessError> {
    info.get(k)
        .cloned()
        .ok_or_else(|| HarnessError::Engine(format!("INFO replication names no {k}")))
}

impl Engine {
    fn cluster_handle(&self) -> Result<&cluster::Running, HarnessError> {
        match &self.handle {
            Handle::Cluster(c) => Ok(c),
            _ => Err(HarnessError::Engine(
                "a node can be killed on a cluster only".into(),
            )),
        }
    }

    /// The node listening (or announced) at `port`, and its proxy.
    fn node(&self, port: u16) -> Result<(&binary::Running, &Proxy), HarnessError> {
        let c = self.cluster_handle()?;
        let real = c.real_port(port);
        c.nodes
            .iter()
            .zip(&c.proxies)
            .find(|(n, _)| n.port == real)
            .ok_or_else(|| HarnessError::Engine(format!("no cluster node at port {port}")))
    }

    /// The port the node at `port` (real) announces to clients: its proxy's.
    pub fn proxy_port(&self, port: u16) -> u16 {
        self.cluster_handle().map_or(port, |c| c.proxy_of(port))
    }

    /// The fault proxy in front of the node at `port` (real or announced).
    pub fn proxy_at(&self, port: u16) -> Result<&Proxy, HarnessError> {
        Ok(self.node(port)?.1)
    }

    /// SIGKILL to the node at `port`; it stays dead until [`Engine::restart_node`].
    pub fn kill_node(&self, port: u16) -> Result<(), HarnessError> {
        self.node(port)?.0.kill();
        Ok(())
    }

    /// SIGSTOP (`stop`) or SIGCONT to the node at `port`.
    pub fn pause_node(&self, port: u16, stop: bool) -> Result<(), HarnessError> {
        let signal = if stop { Signal::STOP } else { Signal::CONT };
        self.node(port)?.0.signal(signal);
        Ok(())
    }

    /// Starts the node at `port` again on its port and directory, announcing its proxy as before:
    /// its `nodes.conf` makes it rejoin, and a peer's newer epoch for its slots makes it a replica.
    pub fn restart_node(&self, port: u16) -> Result<(), HarnessError> {
        let (node, proxy) = self.node(port)?;
        let setting = cluster::announce_setting(self.tls().is_some());
        node.restart(&[format!("--{setting}"), proxy.port().to_string()])
    }

    /// `CONFIG SET name value` on every node that answers; the ports that did not.
    pub fn config_set_all(&self, name: &str, value: &str) -> Vec<u16> {
        self.node_ports()
            .into_iter()
            .filter(|p| {
                crate::engine::Admin::connect(&self.node_url(*p))
                    .and_then(|mut a| a.query::<()>(&["CONFIG", "SET", name, value]))
                    .is_err()
            })
            .collect()
    }

    /// `CONFIG SET name value` on the node at `port`.
    pub fn config_set(&self, port: u16, name: &str, value: &str) -> Result<(), HarnessError> {
        crate::engine::Admin::connect(&self.node_url(port))?
            .query::<()>(&["CONFIG", "SET", name, value])
    }

    /// What the node at `port` took over when it was promoted.
    pub fn take_over(&self, port: u16) -> Result<TakeOver, HarnessError> {
        let info = crate::engine::Admin::connect(&self.node_url(port))?.info("replication")?;
        Ok(TakeOver {
            replid: field(&info, "master_replid")?,
            replid2: field(&info, "master_replid2")?,
            second_repl_offset: field(&info, "second_repl_offset")?
                .parse::<i64>()
                .map_err(|_| HarnessError::Engine("second_repl_offset is no number".into()))?
                .max(0) as u64,
        })
    }
}
