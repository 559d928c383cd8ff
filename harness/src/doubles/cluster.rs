//! Doubles that break SPEC §8, the cluster rules. Each behaves exactly like the reference
//! connector on a single engine (so it passes there, which is the point) and fails on a cluster.

use std::collections::HashMap;

use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::engine::Target;
use crate::error::{ConnectorError, ErrorKind};

/// Ignores `connect`'s `cluster` flag: a plain connection to the seed node only (R8.1).
pub struct SeedNodeOnly(pub Reference);

impl Connector for SeedNodeOnly {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let seed_only = request.map_connect(|t| {
            Some(Target {
                cluster: false,
                ..t
            })
        });
        self.0.call(seed_only.as_ref().unwrap_or(request))
    }
}

/// R8.5 broken: on a cluster, the session works in database 0 whatever the url names (a
/// library that drops a cluster url's `/db`, or gives its nodes database 0, as redis-py does).
pub struct ClusterDatabaseDropped(pub Reference);

impl Connector for ClusterDatabaseDropped {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        // A url that is no engine url goes as it is: the reference refuses it.
        let db0 = request.map_connect(|t| t.cluster.then(|| t.map_url(|u| u.with_db(Some(0)))));
        self.0.call(db0.as_ref().unwrap_or(request))
    }
}

/// R8.7 broken: a claim that met `TRYAGAIN` (a slot in migration) answers "no job", as a
/// connector that maps every error of a read-like call to an empty result would.
pub struct TryagainAsNothing(pub Reference);

impl Connector for TryagainAsNothing {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match (request, self.0.call(request)) {
            (Request::Claim { .. }, Err(e)) if e.message.contains("TryAgain") => {
                Ok(Reply::Claim(None))
            }
            (_, r) => r,
        }
    }
}

/// R8.10 broken: on a cluster, after its first lost connection a session gives up: every later
/// call answers kind `engine` without reaching the engine, until the session is connected again
/// (a worker loop that ended at the first error; each error alone is reported rightly).
pub struct GivesUpAfterError {
    inner: Reference,
    /// Cluster sessions, and those that gave up, with the error they gave up on.
    cluster: std::collections::HashSet<String>,
    gave_up: HashMap<String, String>,
}

impl GivesUpAfterError {
    pub fn new(inner: Reference) -> Self {
        Self {
            inner,
            cluster: Default::default(),
            gave_up: HashMap::new(),
        }
    }
}

impl Connector for GivesUpAfterError {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let session = request.session().unwrap_or_default().to_string();
        match request {
            Request::Connect { cluster, .. } => {
                self.gave_up.remove(&session);
                if *cluster {
                    self.cluster.insert(session.clone());
                }
            }
            Request::Disconnect { .. } => {
                self.gave_up.remove(&session);
            }
            _ => {
                if let Some(why) = self.gave_up.get(&session) {
                    return Err(ConnectorError::engine(format!("stopped after: {why}")));
                }
            }
        }
        let r = self.inner.call(request);
        if let Err(e) = &r
            && e.kind == ErrorKind::Engine
            && lost(e)
            && self.cluster.contains(&session)
        {
            self.gave_up.insert(session, e.message.clone());
        }
        r
    }
}

/// R4.17 broken on a cluster (R8.10: no job runs twice): an `enqueue` that failed because its
/// connection was lost (reset, refused, closed: not a reply of the engine's) is sent once more;
/// when the first ran, its job is there twice.
pub struct ResendEnqueueAfterReset {
    inner: Reference,
    cluster: std::collections::HashSet<String>,
}

impl ResendEnqueueAfterReset {
    pub fn new(inner: Reference) -> Self {
        Self {
            inner,
            cluster: Default::default(),
        }
    }
}

impl Connector for ResendEnqueueAfterReset {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        if let Request::Connect {
            session,
            cluster: true,
            ..
        } = request
        {
            self.cluster.insert(session.clone());
        }
        let on_cluster = request.session().is_some_and(|s| self.cluster.contains(s));
        match (request, self.inner.call(request)) {
            (Request::Enqueue { .. }, Err(e))
                if on_cluster && e.kind == ErrorKind::Engine && lost(&e) =>
            {
                self.inner.call(request)
            }
            (_, r) => r,
        }
    }
}

/// True for an error that says the connection was lost rather than what the engine answered.
fn lost(e: &ConnectorError) -> bool {
    let m = e.message.to_ascii_lowercase();
    [
        "reset",
        "refused",
        "broken pipe",
        "closed",
        "end of file",
        "eof",
        "terminated",
        "timed out",
        "io error",
    ]
    .iter()
    .any(|w| m.contains(w))
}
