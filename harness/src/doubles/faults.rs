//! Doubles that mishandle a failed connection: what G8's fault phase exists to catch.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::connector::{Connector, Reply, Request, RetryOutcome};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::grammar::job_id;

/// True for the calls that run a script (the ones a lost reply makes indeterminate).
fn scripted(r: &Request) -> bool {
    r.verb().script().is_some()
}

/// On an `engine` error from a script call, reconnects the session to the url it remembers and
/// sends the same request once more: after a lost reply, the call runs twice.
pub struct ResendAfterError<C> {
    pub inner: C,
    urls: HashMap<String, Request>,
}

impl<C> ResendAfterError<C> {
    pub fn new(inner: C) -> Self {
        Self {
            inner,
            urls: HashMap::new(),
        }
    }
}

impl<C: Connector> Connector for ResendAfterError<C> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        if let Request::Connect { session, .. } = request {
            self.urls.insert(session.clone(), request.clone());
        }
        match self.inner.call(request) {
            Err(e) if e.kind == ErrorKind::Engine && scripted(request) => {
                let session = request.session().unwrap_or_default().to_string();
                let Some(connect) = self.urls.get(&session).cloned() else {
                    return Err(e);
                };
                let _ = self.inner.call(&Request::Disconnect {
                    session: session.clone(),
                });
                self.inner.call(&connect)?;
                self.inner.call(request)
            }
            other => other,
        }
    }

    fn kill(&mut self) -> bool {
        self.inner.kill()
    }
}

/// On an `engine` error from enqueue, complete or retry, answers success: a made-up id (the next
/// one after the last it saw), `true`, `delayed`; though the call may never have reached the engine.
pub struct AckUnsent<C> {
    pub inner: C,
    last_id: u64,
}

impl<C> AckUnsent<C> {
    pub fn new(inner: C) -> Self {
        Self { inner, last_id: 0 }
    }
}

impl<C: Connector> Connector for AckUnsent<C> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match (self.inner.call(request), request) {
            (Ok(Reply::Id(id)), _) => {
                self.last_id = id[1..].parse().unwrap_or(self.last_id);
                Ok(Reply::Id(id))
            }
            (Err(e), r) if e.kind == ErrorKind::Engine => match r {
                Request::Enqueue { .. } => {
                    self.last_id += 1;
                    Ok(Reply::Id(job_id(self.last_id)))
                }
                Request::Complete { .. } => Ok(Reply::Done(true)),
                Request::Retry { .. } => Ok(Reply::Retry(RetryOutcome::Delayed)),
                _ => Err(e),
            },
            (other, _) => other,
        }
    }

    fn kill(&mut self) -> bool {
        self.inner.kill()
    }
}

/// Swallows an `engine` error from a script call and answers as if nothing was there to do:
/// claim `null`, enqueue `j0000000000000000`, complete `false`, retry `stale`, promote, reap and
/// batch `0`.
pub struct SwallowErrors<C>(pub C);

impl<C: Connector> Connector for SwallowErrors<C> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match self.0.call(request) {
            Err(e) if e.kind == ErrorKind::Engine && scripted(request) => Ok(match request {
                Request::Claim { .. } => Reply::Claim(None),
                Request::Enqueue { .. } => Reply::Id(job_id(0)),
                Request::Complete { .. } => Reply::Done(false),
                Request::Retry { .. } => Reply::Retry(RetryOutcome::Stale),
                _ => Reply::Count(0),
            }),
            other => other,
        }
    }

    fn kill(&mut self) -> bool {
        self.0.kill()
    }
}

/// A connector that could not be made: every call fails with kind `internal`, saying why.
pub struct Unavailable(pub String);

impl Connector for Unavailable {
    fn call(&mut self, _: &Request) -> Result<Reply, ConnectorError> {
        Err(ConnectorError::internal(self.0.clone()))
    }
}

/// The provisioned Python connector ([`crate::settings::python_connector`]), if there is one.
pub fn python_connector() -> Option<PathBuf> {
    crate::settings::python_connector()
}
