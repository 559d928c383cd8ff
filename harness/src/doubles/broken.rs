//! Doubles that each break one numbered rule of `bundle/SPEC.md` (the rule catalogue,
//! `crate::gates::rules`, names them): unpipelined traffic, a session that outlives its
//! `disconnect`, wrong error kinds, a validation rule skipped, a fence judged wrongly, one shared
//! connection for every session, wrong read results.

use std::collections::{BTreeMap, BTreeSet};

use crate::connector::args::validate;
use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::bundle::Manifest;
use crate::protocol::grammar::{FENCE_KEY, key};

/// R4.11/R4.12 broken: `pipeline_probe` and `batch` one command per round trip. The replies
/// (1..=n, the count) are still right; only the engine sees the difference.
pub struct Unpipelined(pub Reference);

impl Connector for Unpipelined {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        validate(request)?;
        match request {
            Request::PipelineProbe { session, key, n } => {
                let mut replies = Vec::with_capacity(*n as usize);
                for _ in 0..*n {
                    let v = self.0.raw(session, &["INCR", key])?;
                    replies.push(v.and_then(|v| v.parse().ok()).unwrap_or_default());
                }
                Ok(Reply::Probe(replies))
            }
            Request::Batch {
                session,
                queue,
                n,
                payload,
                ..
            } => {
                for _ in 0..*n {
                    self.0.call(&Request::Enqueue {
                        session: session.clone(),
                        queue: queue.clone(),
                        payload: payload.clone(),
                        delay_ms: 0,
                    })?;
                }
                Ok(Reply::Count(*n))
            }
            other => self.0.call(other),
        }
    }
}

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

/// R5.4 broken: an engine error (an error reply, a failed connection) is reported as `internal`.
pub struct EngineAsInternal(pub Reference);

impl Connector for EngineAsInternal {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        self.0.call(request).map_err(|mut e| {
            if e.kind == ErrorKind::Engine {
                e.kind = ErrorKind::Internal;
            }
            e
        })
    }
}

/// One argument rule (R1.1, R4.1–R4.7) that a [`Lenient`] double skips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Check {
    /// R1.1: the queue name.
    Queue,
    /// R4.1: `delay_ms`, `lease_ms`, `backoff_ms` in 0..=10^12.
    Ms,
    /// R4.2: `attempts` in 0..=2 147 483 647.
    Attempts,
    /// R4.3: `max_attempts` in 1..=2 147 483 647.
    MaxAttempts,
    /// R4.4: `limit` and `offset` in 0..=2 147 483 647.
    LimitOffset,
    /// R4.5: ids `^j[0-9]{16}$`.
    Id,
    /// R4.6: `n` and `depth` of the probe and the batch.
    Count,
    /// R4.7: the probe key.
    ProbeKey,
}

/// `req` with the argument(s) `check` governs set to a valid value.
fn repaired(check: Check, req: &Request) -> Request {
    let mut r = req.clone();
    match (&mut r, check) {
        (
            Request::Enqueue { queue, .. }
            | Request::Browse { queue, .. }
            | Request::PendingSize { queue, .. }
            | Request::Claim { queue, .. }
            | Request::Complete { queue, .. }
            | Request::Retry { queue, .. }
            | Request::Promote { queue, .. }
            | Request::Reap { queue, .. }
            | Request::Batch { queue, .. },
            Check::Queue,
        ) => *queue = "q".into(),
        (
            Request::Enqueue { delay_ms: ms, .. } | Request::Claim { lease_ms: ms, .. },
            Check::Ms,
        ) => *ms = 0,
        (Request::Retry { backoff_ms, .. }, Check::Ms) => *backoff_ms = 0,
        (Request::Complete { attempts, .. } | Request::Retry { attempts, .. }, Check::Attempts) => {
            *attempts = 0
        }
        (
            Request::Retry { max_attempts, .. } | Request::Reap { max_attempts, .. },
            Check::MaxAttempts,
        ) => *max_attempts = 1,
        (Request::Browse { offset, limit, .. }, Check::LimitOffset) => {
            *offset = 0;
            *limit = 0;
        }
        (Request::Promote { limit, .. } | Request::Reap { limit, .. }, Check::LimitOffset) => {
            *limit = 0
        }
        (Request::Complete { id, .. } | Request::Retry { id, .. }, Check::Id) => {
            *id = "j0000000000000001".into()
        }
        (Request::PipelineProbe { n, .. }, Check::Count) => *n = 1,
        (Request::Batch { n, depth, .. }, Check::Count) => {
            *n = 1;
            *depth = 1;
        }
        (Request::PipelineProbe { key, .. }, Check::ProbeKey) => *key = "probe".into(),
        _ => {}
    }
    r
}

/// R1.1 and R4.1–R4.7 broken one at a time: a request whose only fault is the argument `check` governs
/// is sent to the engine as it is; every other fault is still refused.
pub struct Lenient {
    pub inner: Reference,
    pub check: Check,
}

impl Connector for Lenient {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match validate(request) {
            Ok(()) => self.inner.call(request),
            Err(e) => {
                if validate(&repaired(self.check, request)).is_ok() {
                    self.inner.call_unvalidated(request)
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// What a [`Strict`] double refuses beyond SPEC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// A probe key starting with `emq` in any case, colon or not (R4.7 is `emq:`, case-sensitive).
    ProbeKey,
    /// A session name outside `[A-Za-z0-9_-]{1,64}` (SPEC R5.10: any non-empty string).
    SessionName,
    /// A job id numbered 0 (R4.5: `j` and any 16 digits).
    IdZero,
    /// A queue name with a `.` (a `[\w-]` check; R1.1 allows `.`).
    QueueDot,
    /// Milliseconds above the int32 maximum (R4.1 allows up to 10^12).
    MsInt32,
    /// `attempts` 0 (R4.2 allows 0: a pending job's token).
    AttemptsZero,
    /// `limit` 0 (R4.4 allows 0).
    LimitZero,
}

/// A refusal rule stricter than SPEC: valid requests that a real connector's extra check
/// refuses with kind `invalid`; everything else goes to the reference.
pub struct Strict {
    pub inner: Reference,
    pub what: Strictness,
}

impl Strict {
    fn refuses(&self, request: &Request) -> Option<String> {
        match (self.what, request) {
            (Strictness::ProbeKey, Request::PipelineProbe { key, .. })
                if key.to_ascii_lowercase().starts_with("emq") =>
            {
                Some(format!("probe key {key:?} is reserved"))
            }
            (Strictness::IdZero, Request::Complete { id, .. } | Request::Retry { id, .. })
                if id == "j0000000000000000" =>
            {
                Some(format!("job id {id:?} is not a minted id"))
            }
            (
                Strictness::QueueDot,
                Request::Enqueue { queue, .. }
                | Request::Browse { queue, .. }
                | Request::PendingSize { queue, .. }
                | Request::Claim { queue, .. }
                | Request::Complete { queue, .. }
                | Request::Retry { queue, .. }
                | Request::Promote { queue, .. }
                | Request::Reap { queue, .. }
                | Request::Batch { queue, .. },
            ) if queue.contains('.') => Some(format!("queue name {queue:?} is not [A-Za-z0-9_-]+")),
            (
                Strictness::MsInt32,
                Request::Enqueue { delay_ms: ms, .. }
                | Request::Claim { lease_ms: ms, .. }
                | Request::Retry { backoff_ms: ms, .. },
            ) if *ms > i64::from(i32::MAX) => Some(format!("{ms} ms does not fit an int32")),
            (
                Strictness::AttemptsZero,
                Request::Complete { attempts: 0, .. } | Request::Retry { attempts: 0, .. },
            ) => Some("attempts must be >= 1".into()),
            (
                Strictness::LimitZero,
                Request::Browse { limit: 0, .. }
                | Request::Promote { limit: 0, .. }
                | Request::Reap { limit: 0, .. },
            ) => Some("limit must be >= 1".into()),
            (Strictness::SessionName, r) => r
                .session()
                .filter(|s| {
                    s.is_empty()
                        || s.len() > 64
                        || !s
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                })
                .map(|s| format!("session name {s:?} is not [A-Za-z0-9_-]{{1,64}}")),
            _ => None,
        }
    }
}

impl Connector for Strict {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match self.refuses(request) {
            Some(why) => Err(ConnectorError::invalid(why)),
            None => self.inner.call(request),
        }
    }
}

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

/// R2.5 broken: `browse` lists the window in reverse claim order.
pub struct BrowseReversed(pub Reference);

impl Connector for BrowseReversed {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match self.0.call(request)? {
            Reply::Jobs(mut jobs) => {
                jobs.reverse();
                Ok(Reply::Jobs(jobs))
            }
            other => Ok(other),
        }
    }
}

/// R2.6 broken: `pending_size` counts the active set too.
pub struct PendingSizeCountsActive(pub Reference);

impl Connector for PendingSizeCountsActive {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let reply = self.0.call(request)?;
        match (request, reply) {
            (Request::PendingSize { session, queue }, Reply::Count(n)) => {
                let active = self.0.raw(session, &["ZCARD", &key(queue, "active")])?;
                Ok(Reply::Count(
                    n + active.and_then(|a| a.parse::<i64>().ok()).unwrap_or(0),
                ))
            }
            (_, other) => Ok(other),
        }
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

/// R1.1 and R4.5 as a `^...$` regex reads them in Python's `re.match` or Ruby: a queue name or an
/// id that is valid but for one trailing `\n` passes validation and is sent.
pub struct DollarAnchored(pub Reference);

/// `request` with one trailing `\n` taken off its `queue` and `id`.
fn without_trailing_newline(request: &Request) -> Request {
    let mut v = serde_json::to_value(request).expect("requests serialize");
    for field in ["queue", "id"] {
        if let Some(serde_json::Value::String(s)) = v.get_mut(field)
            && let Some(t) = s.strip_suffix('\n')
        {
            *s = t.to_string();
        }
    }
    serde_json::from_value(v).expect("the same request, one newline shorter")
}

impl Connector for DollarAnchored {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        match validate(request) {
            Ok(()) => self.0.call(request),
            Err(e) if validate(&without_trailing_newline(request)).is_ok() => {
                let _ = e;
                self.0.call_unvalidated(request)
            }
            Err(e) => Err(e),
        }
    }
}
