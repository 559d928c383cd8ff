//! Doubles that break SPEC §8, the cluster rules. Each behaves exactly like the reference
//! connector on a single engine (so it passes there, which is the point) and fails on a cluster.

use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::ConnectorError;
use crate::protocol::url::EngineUrl;

/// Ignores `connect`'s `cluster` flag: a plain connection to the seed node only (R8.1).
pub struct SeedNodeOnly(pub Reference);

impl Connector for SeedNodeOnly {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match request {
            Request::Connect {
                session,
                url,
                ca_file,
                ..
            } => self.0.call(&Request::Connect {
                session: session.clone(),
                url: url.clone(),
                cluster: false,
                ca_file: ca_file.clone(),
            }),
            other => self.0.call(other),
        }
    }
}

/// R8.5 broken: on a cluster, a url naming another database connects anyway (to database 0).
pub struct ClusterAnyDatabase(pub Reference);

impl Connector for ClusterAnyDatabase {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match request {
            Request::Connect {
                session,
                url,
                cluster: true,
                ca_file,
            } => {
                // A url that is no engine url goes as it is: the reference refuses it.
                let url = EngineUrl::parse(url)
                    .map_or_else(|_| url.clone(), |u| u.with_db(Some(0)).to_string());
                self.0.call(&Request::Connect {
                    session: session.clone(),
                    url,
                    cluster: true,
                    ca_file: ca_file.clone(),
                })
            }
            other => self.0.call(other),
        }
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
