//! L3 under test: the [`Connector`] trait, the requests and replies it carries (mirroring the wire
//! protocol of SPEC §5), and the typed [`Verbs`] every caller in the harness uses.
//!
//! One trait serves the in-process reference connector and a child process in any language, so both
//! are judged by one code path.
//!
//! # Example: a complete (if useless) connector
//!
//! ```
//! use emq::connector::{Connector, Identity, Reply, Request, Verbs};
//! use emq::error::{ConnectorError, ErrorKind};
//!
//! /// Knows who it is and nothing else.
//! struct Shy;
//!
//! impl Connector for Shy {
//!     fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
//!         match request {
//!             Request::Hello { .. } => Ok(Reply::Hello(Identity {
//!                 name: "shy".into(),
//!                 version: "0.1.0".into(),
//!                 language: "rust".into(),
//!                 bundle: "1.0.0".into(),
//!                 scripts: Default::default(),
//!             })),
//!             other => Err(ConnectorError::new(
//!                 ErrorKind::Unsupported,
//!                 format!("{} is not implemented", other.cmd()),
//!             )),
//!         }
//!     }
//! }
//!
//! let mut c = Shy;
//! assert_eq!(c.hello().unwrap().name, "shy");
//! let err = c.pending_size("s", "orders").unwrap_err();
//! assert_eq!(err.kind, ErrorKind::Unsupported);
//! ```

pub mod args;
pub mod child;
pub mod reference;
pub mod schema;
pub mod starts;
pub mod verbs;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ConnectorError;
pub use verbs::{Cmd, Request};

/// The connector's identity, as `hello` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Identity {
    pub name: String,
    pub version: String,
    pub language: String,
    pub bundle: String,
    /// Script name → the sha1 the connector will send.
    pub scripts: BTreeMap<String, String>,
}

/// One job as `browse` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BrowsedJob {
    /// A job id, exactly 17 characters: no dialect's `$` lets a trailing newline in (SPEC R4.5).
    #[schemars(pattern(r"^j[0-9]{16}"), length(equal = 17))]
    pub id: String,
    pub payload: String,
}

/// A successful claim: the job and its fencing token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Claimed {
    /// A job id, exactly 17 characters: no dialect's `$` lets a trailing newline in (SPEC R4.5).
    #[schemars(pattern(r"^j[0-9]{16}"), length(equal = 17))]
    pub id: String,
    pub payload: String,
    pub attempts: i64,
}

/// What `retry` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RetryOutcome {
    Delayed,
    Dead,
    Stale,
}

/// A successful reply; which variant depends on the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Hello(Identity),
    Unit,
    Id(String),
    Jobs(Vec<BrowsedJob>),
    Count(i64),
    Claim(Option<Claimed>),
    Done(bool),
    Retry(RetryOutcome),
    Probe(Vec<i64>),
}

/// A connector of EchoMQ under test. One method: answer one request.
///
/// Sessions are named by the caller; each is its own engine connection. An implementation must
/// validate arguments before sending anything (kind `invalid`), and report every failure with one of
/// the five [`crate::error::ErrorKind`]s — never panic for a bad request.
pub trait Connector {
    /// Answers one request.
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError>;

    /// Ends the connector abruptly (a child process: `SIGKILL`), for crash injection.
    /// Returns false when the connector cannot be killed (in-process).
    fn kill(&mut self) -> bool {
        false
    }

    /// The tail of the connector's own log (a child's stderr), for the record on failure.
    fn log_tail(&self) -> String {
        String::new()
    }

    /// The wire `seq` of the last request sent (a child connector), so a failure can be found
    /// in a `--wire-log`; `None` in process.
    fn last_seq(&self) -> Option<u64> {
        None
    }
}

/// Makes fresh connector instances: a gate may need several (sessions, restarts, crashes).
pub trait ConnectorFactory: Send + Sync {
    /// A new, unconnected connector.
    fn make(&self) -> Result<Box<dyn Connector + Send>, crate::error::HarnessError>;
    /// True when [`Connector::kill`] really kills a process (child connectors).
    fn killable(&self) -> bool {
        false
    }
    /// Forgets what the factory learned from earlier connectors (a child connector's timeout),
    /// so a new gate starts afresh. [`crate::gates::run_gate`] calls it as each gate starts.
    fn reset(&self) {}
    /// Names the gate now running, so the processes started from here on are counted in it.
    fn enter(&self, _gate: &str) {}
    /// Makes sure `n` connectors wait idle, starting the missing ones now, all at once, so their
    /// start-ups overlap instead of following one another: a gate about to hold `n` connectors
    /// side by side, or to kill `n` processes on purpose (G8), has them ready. The starts are
    /// counted under `reason`. A no-op for connectors that start at no cost (in-process).
    fn warm(&self, _n: usize, _reason: starts::StartReason) {}
    /// The processes started so far, by gate and reason; `None` when the factory starts no
    /// processes (the in-process reference).
    fn starts(&self) -> Option<starts::Starts> {
        None
    }
}

impl<F> ConnectorFactory for F
where
    F: Fn() -> Result<Box<dyn Connector + Send>, crate::error::HarnessError> + Send + Sync,
{
    fn make(&self) -> Result<Box<dyn Connector + Send>, crate::error::HarnessError> {
        self()
    }
}

impl<C: Connector + ?Sized> Connector for Box<C> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        (**self).call(request)
    }
    fn kill(&mut self) -> bool {
        (**self).kill()
    }
    fn log_tail(&self) -> String {
        (**self).log_tail()
    }
    fn last_seq(&self) -> Option<u64> {
        (**self).last_seq()
    }
}

impl Reply {
    /// The wire `ok` value of this reply.
    pub fn to_json(&self) -> Value {
        let v = match self {
            Self::Hello(i) => serde_json::to_value(i),
            Self::Unit => Ok(Value::Object(Default::default())),
            Self::Id(s) => Ok(Value::String(s.clone())),
            Self::Jobs(j) => serde_json::to_value(j),
            Self::Count(n) => Ok(Value::from(*n)),
            Self::Claim(c) => serde_json::to_value(c),
            Self::Done(b) => Ok(Value::Bool(*b)),
            Self::Retry(r) => serde_json::to_value(r),
            Self::Probe(v) => serde_json::to_value(v),
        };
        v.expect("replies always serialize")
    }
}

fn mismatch(req: &str, got: &Reply) -> ConnectorError {
    ConnectorError::internal(format!("{req} answered with the wrong shape: {got:?}"))
}

macro_rules! typed {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $out:ty, $variant:ident { $($field:ident: $conv:expr),* }, $pat:pat => $val:expr) => {
        $(#[$doc])*
        fn $name(&mut self, $($arg: $ty),*) -> Result<$out, ConnectorError> {
            let req = Request::$variant { $($field: $conv),* };
            match self.call(&req)? {
                $pat => Ok($val),
                other => Err(mismatch(req.cmd(), &other)),
            }
        }
    };
}

/// Typed verbs over any [`Connector`]: what gates, cases and the model call.
pub trait Verbs: Connector {
    typed!(
        /// `hello` with protocol 1.
        hello() -> Identity, Hello { protocol: 1 }, Reply::Hello(i) => i);
    /// Opens `session` on `target` (the connector reads the fence first): a url for a single
    /// engine, or an [`crate::engine::Target`] that may name a cluster.
    fn connect(
        &mut self,
        session: &str,
        target: impl Into<crate::engine::Target>,
    ) -> Result<(), ConnectorError> {
        let t = target.into();
        let req = Request::Connect {
            session: session.into(),
            url: t.url,
            cluster: t.cluster,
        };
        match self.call(&req)? {
            Reply::Unit => Ok(()),
            other => Err(mismatch(req.cmd(), &other)),
        }
    }
    typed!(
        /// Closes `session`.
        disconnect(session: &str) -> (), Disconnect { session: session.into() }, Reply::Unit => ());
    typed!(
        /// Enqueues one job; returns its id.
        enqueue(session: &str, queue: &str, payload: &str, delay_ms: i64) -> String,
        Enqueue { session: session.into(), queue: queue.into(), payload: payload.into(), delay_ms: delay_ms },
        Reply::Id(s) => s);
    typed!(
        /// Pending ids in claim order with payloads.
        browse(session: &str, queue: &str, offset: i64, limit: i64) -> Vec<BrowsedJob>,
        Browse { session: session.into(), queue: queue.into(), offset: offset, limit: limit },
        Reply::Jobs(j) => j);
    typed!(
        /// `ZCARD` of pending.
        pending_size(session: &str, queue: &str) -> i64,
        PendingSize { session: session.into(), queue: queue.into() }, Reply::Count(n) => n);
    typed!(
        /// Claims the oldest pending job.
        claim(session: &str, queue: &str, lease_ms: i64) -> Option<Claimed>,
        Claim { session: session.into(), queue: queue.into(), lease_ms: lease_ms }, Reply::Claim(c) => c);
    typed!(
        /// Completes a claimed job if the token still holds.
        complete(session: &str, queue: &str, id: &str, attempts: i64) -> bool,
        Complete { session: session.into(), queue: queue.into(), id: id.into(), attempts: attempts },
        Reply::Done(b) => b);
    typed!(
        /// Retries (or buries) a claimed job.
        retry(session: &str, queue: &str, id: &str, attempts: i64, backoff_ms: i64, max_attempts: i64) -> RetryOutcome,
        Retry { session: session.into(), queue: queue.into(), id: id.into(), attempts: attempts,
                backoff_ms: backoff_ms, max_attempts: max_attempts },
        Reply::Retry(r) => r);
    typed!(
        /// Moves due delayed jobs to pending.
        promote(session: &str, queue: &str, limit: i64) -> i64,
        Promote { session: session.into(), queue: queue.into(), limit: limit }, Reply::Count(n) => n);
    typed!(
        /// Moves expired leases back to pending, or to dead.
        reap(session: &str, queue: &str, max_attempts: i64, limit: i64) -> i64,
        Reap { session: session.into(), queue: queue.into(), max_attempts: max_attempts, limit: limit },
        Reply::Count(n) => n);
    typed!(
        /// `n` pipelined `INCR key` replies.
        pipeline_probe(session: &str, key: &str, n: i64) -> Vec<i64>,
        PipelineProbe { session: session.into(), key: key.into(), n: n }, Reply::Probe(v) => v);
    typed!(
        /// `n` enqueues in pipelines of `depth`.
        batch(session: &str, queue: &str, n: i64, depth: i64, payload: &str) -> i64,
        Batch { session: session.into(), queue: queue.into(), n: n, depth: depth, payload: payload.into(), queues: None },
        Reply::Count(n) => n);
    /// `n` enqueues spread over `queues` (enqueue `i` to `queues[i % len]`), in pipelines of `depth`.
    fn batch_over(
        &mut self,
        session: &str,
        queues: &[String],
        n: i64,
        depth: i64,
        payload: &str,
    ) -> Result<i64, ConnectorError> {
        let req = Request::Batch {
            session: session.into(),
            queue: queues.first().cloned().unwrap_or_default(),
            n,
            depth,
            payload: payload.into(),
            queues: Some(queues.to_vec()),
        };
        match self.call(&req)? {
            Reply::Count(n) => Ok(n),
            other => Err(mismatch(req.cmd(), &other)),
        }
    }
}

impl<C: Connector + ?Sized> Verbs for C {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_use_wire_spelling() {
        let r = Request::PendingSize {
            session: "w1".into(),
            queue: "orders".into(),
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"cmd": "pending_size", "session": "w1", "queue": "orders"})
        );
        let back: Request = serde_json::from_value(serde_json::json!(
            {"cmd": "claim", "session": "w1", "queue": "orders", "lease_ms": 30000}))
        .unwrap();
        assert_eq!(back.cmd(), "claim");
    }

    #[test]
    fn replies_round_trip() {
        let req = Request::Claim {
            session: "s".into(),
            queue: "q".into(),
            lease_ms: 1,
        };
        let ok = serde_json::json!({"id": "j0000000000000001", "payload": "hello", "attempts": 1});
        let reply = req.decode_ok(ok.clone()).unwrap();
        assert_eq!(reply.to_json(), ok);
        assert_eq!(req.decode_ok(Value::Null).unwrap(), Reply::Claim(None));
        assert!(req.decode_ok(serde_json::json!("x")).is_err());
    }
}
