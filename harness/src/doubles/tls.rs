//! TLS breakers (SPEC §10), the rewriters among them; the verification quirks
//! (`tls_accept_any`, `tls_skip_names`) are `Quirks` flags of the reference connector. On an
//! engine without TLS the harness sends no `rediss://` url and each of these is the reference.

use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::engine::Target;
use crate::error::ConnectorError;
use crate::protocol::url::{EngineUrl, Scheme};

/// A `rediss://` connect with a `ca_file` as the same connect in plaintext (`redis://`, no
/// `ca_file`): R10.2's breach, for [`PlaintextOnRediss`] and for a test's fall-back double.
pub fn in_plaintext(request: &Request) -> Option<Request> {
    request.map_connect(|t| {
        t.ca_file.as_ref()?;
        let u = t.engine_url().ok().filter(|u| u.scheme == Scheme::Rediss)?;
        let plain = EngineUrl {
            scheme: Scheme::Redis,
            ..u
        };
        Some(Target {
            ca_file: None,
            ..t.at(plain.to_string())
        })
    })
}

/// R10.2 broken: a `rediss://` url is dialled as `redis://`, its `ca_file` dropped.
pub struct PlaintextOnRediss(pub Reference);

impl Connector for PlaintextOnRediss {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match in_plaintext(request) {
            Some(plain) => self.0.call(&plain),
            None => self.0.call(request),
        }
    }
}

/// R10.1 broken: a `ca_file` that cannot be read is dropped, so the session trusts the system's
/// store instead and its connect fails at the handshake (kind `engine`, not `invalid`).
pub struct CaFileUnchecked(pub Reference);

impl Connector for CaFileUnchecked {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let unchecked = request.map_connect(|t| {
            let unreadable = t
                .ca_file
                .as_ref()
                .is_some_and(|path| std::fs::metadata(path).is_err());
            unreadable.then_some(Target { ca_file: None, ..t })
        });
        self.0.call(unchecked.as_ref().unwrap_or(request))
    }
}
