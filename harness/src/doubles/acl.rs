//! ACL breakers (SPEC R4.19): a connector that sends a command outside SPEC's list, and one that
//! ignores the url's user. The engine's least-privilege user refuses both; the `ACL LOG` check
//! after every gate (`crate::gates::acl`) names the command or the failed `AUTH` and the user.

use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::ConnectorError;
use crate::protocol::url::EngineUrl;

/// R4.19 broken: `INFO server` on the session's connection after each connect, as a client
/// library that asks the server's version; the engine answers `NOPERM`, which it ignores.
pub struct InfoAtConnect(pub Reference);

impl Connector for InfoAtConnect {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let reply = self.0.call(request)?;
        if let Request::Connect { session, .. } = request {
            // Refused (NOPERM): what it answers does not matter, the ACL LOG keeps the refusal.
            let _ = self.0.raw(session, &["INFO", "server"]);
        }
        Ok(reply)
    }
}

/// R4.19 broken: the url's user dropped, so the client sends `AUTH <password>` alone, which
/// authenticates as `default` (off): every connect fails with kind `engine`.
pub struct AuthWithoutUser(pub Reference);

impl Connector for AuthWithoutUser {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        // A url that is no engine url goes as it is: the reference refuses it.
        let no_user = request.map_connect(|t| Some(t.map_url(|u| EngineUrl { user: None, ..u })));
        self.0.call(no_user.as_ref().unwrap_or(request))
    }
}
