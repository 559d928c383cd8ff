//! Doubles that judge the version fence wrongly (SPEC §3): installed without `MULTI`/`EXEC`,
//! another digest refused, another protocol let in or refused with the wrong kind.

use std::collections::BTreeMap;

use crate::connector::args::validate;
use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::bundle::Manifest;
use crate::protocol::grammar::FENCE_KEY;

/// R3.4 broken: a fence of another protocol refuses the connect, but with kind `engine` (a
/// generic error raised for it), not `fence`.
pub struct FenceAsEngine(pub Reference);

impl Connector for FenceAsEngine {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        self.0.call(request).map_err(|mut e| {
            if e.kind == ErrorKind::Fence {
                e.kind = ErrorKind::Engine;
            }
            e
        })
    }
}

/// Reads the fence's `fields` with `HMGET` (a fence read): field → value, absent fields left out.
fn fence_fields(
    r: &mut Reference,
    session: &str,
    fields: &[&str],
) -> Result<BTreeMap<String, String>, ConnectorError> {
    let mut args = vec!["HMGET", FENCE_KEY];
    args.extend_from_slice(fields);
    let got = r.raw(session, &args)?.unwrap_or_default();
    Ok(fields
        .iter()
        .zip(got.split('\n').chain(std::iter::repeat("")))
        .filter(|(_, v)| !v.is_empty())
        .map(|(f, v)| ((*f).to_string(), v.to_string()))
        .collect())
}

/// R3.2 broken: an absent fence is installed with one plain `HSET` outside `MULTI`/`EXEC`.
pub struct FenceHset {
    pub inner: Reference,
    pub protocol: String,
    pub bundle: String,
    pub digest: String,
}

impl FenceHset {
    /// Over `inner`, installing the fence of `m`.
    pub fn new(inner: Reference, m: &Manifest) -> Self {
        Self {
            inner,
            protocol: m.protocol.to_string(),
            bundle: m.bundle.clone(),
            digest: m.digest.clone(),
        }
    }
}

impl Connector for FenceHset {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let Some((session, target)) = request.as_connect() else {
            return self.inner.call(request);
        };
        validate(request)?;
        self.inner.connect_unfenced(session, &target)?;
        let mut fence = fence_fields(&mut self.inner, session, &["protocol", "bundle"])?;
        if fence.is_empty() {
            self.inner.raw(
                session,
                &[
                    "HSET",
                    FENCE_KEY,
                    "protocol",
                    &self.protocol,
                    "bundle",
                    &self.bundle,
                    "digest",
                    &self.digest,
                ],
            )?;
            fence = fence_fields(&mut self.inner, session, &["protocol", "bundle"])?;
        }
        let theirs = fence.get("protocol").cloned().unwrap_or_default();
        if theirs != self.protocol {
            self.inner.call(&Request::Disconnect {
                session: session.into(),
            })?;
            return Err(ConnectorError::new(
                ErrorKind::Fence,
                format!(
                    "fence protocol {theirs} (bundle {}) does not match connector protocol {} (bundle {})",
                    fence.get("bundle").map_or("<none>", String::as_str),
                    self.protocol,
                    self.bundle
                ),
            ));
        }
        Ok(Reply::Unit)
    }
}

/// R3.3 broken: a fence of the same protocol but another digest is refused (kind `fence`).
pub struct FenceRefusesOtherDigest {
    pub inner: Reference,
    pub digest: String,
}

impl FenceRefusesOtherDigest {
    /// Over `inner`, taking `m`'s digest for its own.
    pub fn new(inner: Reference, m: &Manifest) -> Self {
        Self {
            inner,
            digest: m.digest.clone(),
        }
    }
}

impl Connector for FenceRefusesOtherDigest {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let reply = self.inner.call(request)?;
        if let Request::Connect { session, .. } = request {
            let fence = fence_fields(&mut self.inner, session, &["digest"])?;
            let theirs = fence.get("digest").cloned().unwrap_or_default();
            if theirs != self.digest {
                self.inner.call(&Request::Disconnect {
                    session: session.clone(),
                })?;
                return Err(ConnectorError::new(
                    ErrorKind::Fence,
                    format!("fence digest {theirs} is not ours ({})", self.digest),
                ));
            }
        }
        Ok(reply)
    }
}

/// R3.4 broken: a refused fence is logged and the session connected anyway.
pub struct FenceIgnoresProtocol(pub Reference);

impl Connector for FenceIgnoresProtocol {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match (request.as_connect(), self.0.call(request)) {
            (Some((session, target)), Err(e)) if e.kind == ErrorKind::Fence => {
                self.0.connect_unfenced(session, &target)?;
                Ok(Reply::Unit)
            }
            (_, r) => r,
        }
    }
}
