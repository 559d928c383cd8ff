//! Doubles that judge a request's arguments wrongly: a rule of R1.1 or R4.1–R4.7 skipped
//! ([`Lenient`], [`DollarAnchored`]), or a refusal stricter than SPEC ([`Strict`]).

use crate::connector::args::validate;
use crate::connector::reference::Reference;
use crate::connector::{Connector, Reply, Request};
use crate::error::ConnectorError;

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
        (r, Check::Queue) => {
            if let Some(queue) = r.queue_mut() {
                *queue = "q".into();
            }
        }
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
            (Strictness::QueueDot, r) => r
                .queue()
                .filter(|q| q.contains('.'))
                .map(|q| format!("queue name {q:?} is not [A-Za-z0-9_-]+")),
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
