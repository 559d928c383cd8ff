//! A node the harness booted one by one (a cluster's, a Sentinel engine's data node or Sentinel)
//! behind its own fault proxy, with every address it has. Apart from what is done to it
//! (`crate::engine::nodes`) and what is asked of it (`crate::engine::topology`), which both name
//! it, so neither imports the other through it.

use crate::engine::binary;
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
