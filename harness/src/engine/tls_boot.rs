//! Booting a single TLS engine (SPEC §10), binary or container: the run's certificates, the back
//! the harness reaches the engine through, and the TLS proxy every connector connects through.

use super::{Engine, EngineKind, Handle, acl, binary, container};
use crate::error::HarnessError;

/// What a single TLS engine adds: the run's certificates, the back the harness reaches the engine
/// through in plaintext (its `host:port`), and the TLS proxy every connector connects through.
pub(super) struct TlsEngine {
    pub(super) run: std::sync::Arc<crate::tls::RunTls>,
    /// The engine's own TLS port (the bench's, beside `valkey-benchmark --tls`).
    pub(super) port: u16,
    pub(super) front: crate::faults::Proxy,
    _back: crate::tls::relay::Back,
}

/// A TLS server's two ways in (SPEC §10), for a single engine and a cluster's node alike: the
/// back the harness reaches the server at `addr` through in plaintext, and in front of it the
/// fault proxy with its TLS front, where connectors connect.
pub(super) fn front_and_back(
    run: &std::sync::Arc<crate::tls::RunTls>,
    addr: std::net::SocketAddr,
) -> Result<(crate::faults::Proxy, crate::tls::relay::Back), HarnessError> {
    let back = crate::tls::relay::Back::start(run, addr)
        .map_err(|e| HarnessError::io("start a TLS back", e))?;
    let front = crate::faults::Proxy::start_tls(&back.addr().to_string(), run)
        .map_err(|e| HarnessError::io("start a TLS front", e))?;
    Ok((front, back))
}

impl Engine {
    /// A binary engine over TLS only (SPEC §10): found and booted as every binary engine is
    /// ([`Engine::from_binary`]), on the run's certificates, then fronted ([`Engine::tls_fronted`]).
    pub(super) fn binary_tls(path: Option<&std::path::Path>) -> Result<Self, HarnessError> {
        let run = crate::tls::RunTls::new()?;
        Self::from_binary(EngineKind::Binary, path, |path, users| {
            let running = binary::start_tls(path, users, &run)?;
            Ok((running.port, Handle::Binary(running)))
        })?
        .tls_fronted(run)
    }

    /// [`Engine::binary_tls`] in a container of `image` (a build with TLS).
    pub(super) fn container_tls(image: &str) -> Result<Self, HarnessError> {
        let users = acl::Users::random(acl::redis_version_of_image(image));
        let run = crate::tls::RunTls::new()?;
        let running = container::start_tls(image, &users, &run)?;
        let port = running.port;
        let handle = Handle::Container(Box::new(running));
        Self::booted(
            EngineKind::Container,
            image.into(),
            "127.0.0.1".into(),
            port,
            &users,
            handle,
        )
        .tls_fronted(run)
    }

    /// The engine booted listening over TLS at its loopback port, given a back the harness
    /// reaches it through (its port from now on) and the TLS proxy in front for connectors.
    fn tls_fronted(
        mut self,
        run: std::sync::Arc<crate::tls::RunTls>,
    ) -> Result<Self, HarnessError> {
        let tls_port = self.port;
        let engine_addr = std::net::SocketAddr::from(([127, 0, 0, 1], tls_port));
        let (front, back) = front_and_back(&run, engine_addr)?;
        self.host = "127.0.0.1".into();
        self.port = back.addr().port();
        self.tls = Some(TlsEngine {
            run,
            port: tls_port,
            front,
            _back: back,
        });
        Ok(self)
    }
}
