//! A booted node ([`Node`]: its process and addresses) and what is done to it, for G8's unclean
//! failover (SPEC R8.10) and a Sentinel engine's: killed (SIGKILL), stopped
//! and woken (SIGSTOP, SIGCONT), restarted on its port and directory so that it rejoins as a
//! replica; the cluster's failure detection tuned for a scenario and restored after; and a node's
//! replication position, read on a side connection.

use rustix::process::Signal;

use crate::engine::Engine;
pub use crate::engine::admin::side::{ReplPosition, SideReader, parse_position};
use crate::engine::binary;
use crate::engine::topology::NodeId;
use crate::error::HarnessError;
use crate::faults::Proxy;

/// One booted node (a cluster's, a Sentinel engine's data node or Sentinel) and every address it
/// has: the server's own port (replication and the cluster bus on a cluster; the harness's way
/// in), its fault proxy (the port it announces to clients; on a TLS cluster, the proxy's TLS
/// front), and on a TLS cluster the back the harness reaches it through in plaintext.
pub struct Node {
    pub server: binary::Running,
    pub proxy: Proxy,
    pub back: Option<crate::tls::relay::Back>,
    /// The flags that make it announce its proxy again when restarted: what the boot set with
    /// `CONFIG SET` does not outlive the process.
    pub announce: Vec<String>,
}

impl Node {
    /// `server` behind a fault proxy of its own (with `tls`, a TLS front and a plaintext back),
    /// announcing nothing yet.
    pub fn behind_proxy(
        server: binary::Running,
        tls: Option<&std::sync::Arc<crate::tls::RunTls>>,
    ) -> Result<Self, HarnessError> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
        let (proxy, back) = match tls {
            Some(run) => {
                let (front, back) = super::tls_boot::front_and_back(run, addr)?;
                (front, Some(back))
            }
            None => (
                Proxy::start(&addr.to_string()).map_err(|e| {
                    HarnessError::io(format!("start the fault proxy of port {}", addr.port()), e)
                })?,
                None,
            ),
        };
        Ok(Self {
            server,
            proxy,
            back,
            announce: Vec::new(),
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.server.port
    }

    /// The port the node announces to clients: its proxy's.
    pub fn announced(&self) -> u16 {
        self.proxy.port()
    }

    /// Where the harness reaches the node in plaintext: the server, or on a TLS cluster its back.
    pub fn admin_port(&self) -> u16 {
        self.back.as_ref().map_or(self.port(), |b| b.addr().port())
    }

    /// True when `port` is one of the node's addresses.
    pub fn has_port(&self, port: u16) -> bool {
        [self.port(), self.announced(), self.admin_port()].contains(&port)
    }
}

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
    /// SIGKILL to node `id`; it stays dead until [`Engine::restart_node`].
    pub fn kill_node(&self, id: NodeId) -> Result<(), HarnessError> {
        self.booted_node(id)?.server.kill();
        Ok(())
    }

    /// SIGSTOP (`stop`) or SIGCONT to node `id`.
    pub fn pause_node(&self, id: NodeId, stop: bool) -> Result<(), HarnessError> {
        let signal = if stop { Signal::STOP } else { Signal::CONT };
        self.booted_node(id)?.server.signal(signal);
        Ok(())
    }

    /// Starts node `id` again on its port and directory, announcing its proxy as before. A
    /// cluster's node rejoins by its `nodes.conf`, and a peer's newer epoch for its slots makes it
    /// a replica; a Sentinel engine's comes back a primary of nothing, which its Sentinels turn
    /// into a replica of the primary they know.
    pub fn restart_node(&self, id: NodeId) -> Result<(), HarnessError> {
        let node = self.booted_node(id)?;
        node.server.restart(&node.announce)
    }

    /// `CONFIG SET name value` on every node that answers; the nodes that did not.
    pub fn config_set_all(&self, name: &str, value: &str) -> Vec<NodeId> {
        self.nodes()
            .into_iter()
            .filter(|id| self.config_set(*id, name, value).is_err())
            .collect()
    }

    /// `CONFIG SET name value` on node `id`.
    pub fn config_set(&self, id: NodeId, name: &str, value: &str) -> Result<(), HarnessError> {
        self.node_admin(id)?
            .query::<()>(&["CONFIG", "SET", name, value])
    }

    /// What node `id` took over when it was promoted.
    pub fn take_over(&self, id: NodeId) -> Result<TakeOver, HarnessError> {
        let info = self.node_admin(id)?.info("replication")?;
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
