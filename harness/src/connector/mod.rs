//! L3 under test: the [`Connector`] trait, the values its replies carry (mirroring the wire
//! protocol of SPEC §5); the requests, the [`Reply`] shapes and the typed [`Verbs`] every caller
//! in the harness uses are declared with the verbs (see [`verbs`]).
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
pub mod replies;
pub mod schema;
pub mod starts;
pub mod verbs;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::ConnectorError;
pub use verbs::{Cmd, Reply, Request, Verbs};

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
    #[serde(deserialize_with = "replies::job_id")]
    pub id: String,
    pub payload: String,
}

/// A successful claim: the job and its fencing token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Claimed {
    /// A job id, exactly 17 characters: no dialect's `$` lets a trailing newline in (SPEC R4.5).
    #[schemars(pattern(r"^j[0-9]{16}"), length(equal = 17))]
    #[serde(deserialize_with = "replies::job_id")]
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

    /// Ends the connector as the harness ends a process it is done with: `stop`, then the
    /// process group is ended whatever happened. A child must send nothing and exit 0 within
    /// `within`, grown by the time its processes waited for a CPU meanwhile (R5.9); `Err` is the
    /// one line saying how it did not. `None` where there is no
    /// process to stop (in process), or none healthy (a dead one was judged where it died).
    fn stop(&mut self, _within: std::time::Duration) -> Option<Result<(), String>> {
        None
    }

    /// How long its process took to answer its first request (a child's start-up, measured
    /// when it happened): a wait on that runtime's exit scales to it. `None` in process.
    fn startup(&self) -> Option<std::time::Duration> {
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
    /// The harness holds a node of the engine stopped (`true`: G8's stall) or lets it run again
    /// (`false`). A request in flight meanwhile gets the held time on top of its timeout (SPEC
    /// R5.8): the harness's own stall, however long the engine takes to fail over, is never
    /// counted against a connector. A no-op where the harness times no request (in-process).
    fn hold(&self, _stopped: bool) {}
    /// The first request that timed out since the last [`Self::reset`] (`no answer to batch
    /// (seq 4) within 10.5 s`): a breach of R5.8 whatever else the gate saw.
    fn timed_out(&self) -> Option<String> {
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
    fn stop(&mut self, within: std::time::Duration) -> Option<Result<(), String>> {
        (**self).stop(within)
    }
    fn startup(&self) -> Option<std::time::Duration> {
        (**self).startup()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
