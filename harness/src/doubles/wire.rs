//! Doubles that send the wrong thing on the wire, through the reference connector's
//! doubles-only lowering API.

use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::bundle::Bundle;
use crate::protocol::grammar::key;

/// Connects without reading the fence; everything else is the reference's.
pub struct SkipFence(pub Reference);

impl Connector for SkipFence {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match request.as_connect() {
            Some((session, target)) => {
                self.0.connect_unfenced(session, &target)?;
                Ok(Reply::Unit)
            }
            None => self.0.call(request),
        }
    }
}

/// The session and script of a verb that is one `EVALSHA` (the six transitions; not `batch`).
fn script_call(request: &Request) -> Option<(&str, &str, &'static str)> {
    match request {
        Request::Enqueue { session, queue, .. }
        | Request::Claim { session, queue, .. }
        | Request::Complete { session, queue, .. }
        | Request::Retry { session, queue, .. }
        | Request::Promote { session, queue, .. }
        | Request::Reap { session, queue, .. } => Some((session, queue, request.cmd())),
        _ => None,
    }
}

/// `SCRIPT LOAD` of a verb's script before every call of it.
pub struct LoadEveryCall(pub Reference);

impl Connector for LoadEveryCall {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        if let Some((session, queue, name)) = script_call(request) {
            self.0.script_load(session, name, &key(queue, "pending"))?;
        }
        self.0.call(request)
    }
}

/// Takes every engine error of a script call for a `NOSCRIPT` (it does not match the reply's
/// prefix): `SCRIPT LOAD`, then the same `EVALSHA` again. A `WRONGTYPE` then costs a load and a
/// second run of the call; the caller still sees the second error. This is the reference with
/// its `is_noscript` answering true for every error, a mutant that once passed the gate.
pub struct ReloadOnAnyError(pub Reference);

impl Connector for ReloadOnAnyError {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match (self.0.call(request), script_call(request)) {
            (Err(e), Some((session, queue, name))) if e.kind == ErrorKind::Engine => {
                self.0.script_load(session, name, &key(queue, "pending"))?;
                self.0.call(request)
            }
            (other, _) => other,
        }
    }
}

/// `complete` done with raw commands (read, check, `ZREM`, `DEL`) instead of the script.
pub struct RawComplete(pub Reference);

impl Connector for RawComplete {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let Request::Complete {
            session,
            queue,
            id,
            attempts,
        } = request
        else {
            return self.0.call(request);
        };
        let job = format!("{}{id}", crate::protocol::grammar::job_root(queue));
        let active = key(queue, "active");
        let current = self.0.raw(session, &["HGET", &job, "attempts"])?;
        let leased = self.0.raw(session, &["ZSCORE", &active, id])?;
        if leased.is_none() || current != Some(attempts.to_string()) {
            return Ok(Reply::Done(false));
        }
        self.0.raw(session, &["ZREM", &active, id])?;
        self.0.raw(session, &["DEL", &job])?;
        Ok(Reply::Done(true))
    }
}

/// The job root without its hash tag.
pub fn untagged_root(q: &str) -> String {
    format!("emq:{q}:job:")
}

/// `bundle` with a trailing comment on every script: other bytes, other SHAs.
pub fn patched(bundle: &Bundle) -> Bundle {
    let mut b = bundle.clone();
    for s in &mut b.scripts {
        s.source.extend_from_slice(b"-- patched locally\n");
    }
    b
}
