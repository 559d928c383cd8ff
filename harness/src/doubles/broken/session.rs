//! Doubles that break what a session is: one that outlives its `disconnect`, one connection shared
//! by every session, a verb on an unknown session run on another, `hello` of any protocol.

use std::collections::BTreeSet;

use crate::connector::args::validate;
use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::ConnectorError;

/// R4.8/R5.10 broken: `disconnect` answers `{}` but the session keeps its connection, so verbs on
/// it still work.
pub struct ZombieSession {
    pub inner: Reference,
    pub connected: BTreeSet<String>,
}

impl Connector for ZombieSession {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match request {
            Request::Disconnect { session } if self.connected.contains(session) => Ok(Reply::Unit),
            Request::Connect { session, .. } => {
                let r = self.inner.call(request)?;
                self.connected.insert(session.clone());
                Ok(r)
            }
            other => self.inner.call(other),
        }
    }
}

/// R5.7 broken: every session is the first session's connection; disconnecting any ends them all.
pub struct SharedConnection {
    pub inner: Reference,
    pub shared: Option<String>,
}

fn with_session(request: &Request, session: &str) -> Request {
    let mut v = serde_json::to_value(request).expect("a request serializes");
    if let Some(m) = v.as_object_mut()
        && m.contains_key("session")
    {
        m.insert("session".into(), session.into());
    }
    serde_json::from_value(v).expect("the same request with another session")
}

impl Connector for SharedConnection {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match (request, self.shared.clone()) {
            (Request::Connect { session, .. }, None) => {
                let r = self.inner.call(request)?;
                self.shared = Some(session.clone());
                Ok(r)
            }
            (Request::Connect { .. }, Some(_)) => {
                validate(request)?;
                Ok(Reply::Unit)
            }
            (Request::Disconnect { .. }, Some(shared)) => {
                self.shared = None;
                self.inner.call(&with_session(request, &shared))
            }
            (Request::Hello { .. }, _) | (_, None) => self.inner.call(request),
            (other, Some(shared)) => self.inner.call(&with_session(other, &shared)),
        }
    }
}

/// R5.5 broken: `hello` answers whatever protocol it is asked for.
pub struct HelloAnyProtocol(pub Reference);

impl Connector for HelloAnyProtocol {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match request {
            Request::Hello { .. } => self.0.call(&Request::Hello { protocol: 1 }),
            other => self.0.call(other),
        }
    }
}

/// R4.8 broken: a verb on an unknown session runs on some connected session instead of failing.
pub struct FallbackSession {
    pub inner: Reference,
    pub connected: BTreeSet<String>,
}

impl Connector for FallbackSession {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match request {
            Request::Connect { session, .. } => {
                let r = self.inner.call(request)?;
                self.connected.insert(session.clone());
                Ok(r)
            }
            Request::Disconnect { session } => {
                self.connected.remove(session);
                self.inner.call(request)
            }
            other => match self.inner.call(other) {
                Err(e) if e.message.starts_with("unknown session") => {
                    let Some(any) = self.connected.iter().next().cloned() else {
                        return Err(e);
                    };
                    self.inner.call(&with_session(other, &any))
                }
                r => r,
            },
        }
    }
}
