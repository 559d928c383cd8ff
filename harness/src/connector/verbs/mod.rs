//! Every wire verb (SPEC §5), declared once: its name, its typed arguments with their bounds and
//! case defaults, its reply, and the script it runs; and every reply shape, declared once: the
//! [`Reply`] variant, the value a typed method returns, and the wire type it is decoded from.
//! The [`Request`] enum, its argument checks ([`Request::check_args`]), the one match that hands
//! it to a [`Handler`] (the reference connector, the model), the typed [`Verbs`] every caller
//! uses, reply decoding ([`Request::decode_ok`]), the case files' argument table
//! ([`Cmd::args`]), the schema's reply map ([`Cmd::ok_schema`]) and G8's mutating verbs
//! ([`Cmd::script`]) all follow from the `replies!` and `verbs!` invocations below, so a new
//! verb is one entry here plus its answer in each [`Handler`].
//!
//! A field's options, in brackets after its type:
//! - `arg`: a case file names it (required); `arg = d`: a case may leave it out, `d` then;
//!   a field without `arg` (`session`, `cluster`) the case runner fills in;
//! - `in lo..=hi`: its bound, checked before a byte is sent (kind `invalid`);
//! - `check f(..)`: any other rule; the expression sees every field of the request by reference.
//!
//! Checks run in field order, each field's in the order written.
//!
//! A verb's typed method takes every field in order (a `String` as `&str`: [`Param`]), unless
//! the verb has a `, typed { fn name(params) => request; ... }` block after its fields: then
//! those methods instead, each building its request from its own parameters (`hello` without a
//! protocol, `connect` from a [`crate::engine::Target`]). Either way the reply is taken as the
//! verb's [`Reply`] variant, and any other variant is kind `internal`.
//!
//! A reply shape is `Variant(value) = wire type` (`Variant = wire type` without a value): the
//! wire type is what serde decodes the `ok` value into, once, and what the schema describes;
//! it is the value itself unless the wire rule is narrower (see [`replies`]).

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::connector::args::{MAX_MS, batch_queues, connect_url, probe_key, range};
use crate::connector::replies::{self, Empty, JobId};
use crate::connector::{BrowsedJob, Claimed, Connector, Identity, RetryOutcome};
use crate::error::ConnectorError;
use crate::protocol::grammar::{validate_id, validate_queue};

/// Counts and offsets fit a Lua integer the scripts compare (`i32::MAX`).
const MAX_INT: i64 = i32::MAX as i64;

/// What a case-file argument holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Str,
    Int,
    /// A list of strings (`batch`'s `queues`).
    StrList,
}

/// The [`ArgKind`] of a field's Rust type.
pub trait CaseKind {
    const KIND: ArgKind;
}
impl CaseKind for String {
    const KIND: ArgKind = ArgKind::Str;
}
impl CaseKind for i64 {
    const KIND: ArgKind = ArgKind::Int;
}
impl CaseKind for u32 {
    const KIND: ArgKind = ArgKind::Int;
}
impl CaseKind for Option<String> {
    const KIND: ArgKind = ArgKind::Str;
}
impl CaseKind for Option<Vec<String>> {
    const KIND: ArgKind = ArgKind::StrList;
}

/// One argument a case file may give a verb.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    /// `None`: required; `Some(Value::Null)`: absent unless given.
    pub default: Option<Value>,
    /// Its bound (`in lo..=hi`), if it has one.
    pub range: Option<(i64, i64)>,
}

/// How a typed [`Verbs`] method takes a field: a `String` as `&str`, a number as itself.
pub trait Param {
    /// The parameter's type.
    type Arg<'a>;
    /// The field's value.
    fn own(arg: Self::Arg<'_>) -> Self;
}
impl Param for String {
    type Arg<'a> = &'a str;
    fn own(arg: &str) -> Self {
        arg.into()
    }
}
impl Param for i64 {
    type Arg<'a> = i64;
    fn own(arg: i64) -> Self {
        arg
    }
}

mod connect;
#[macro_use]
mod macros;

/// One [`Reply`] variant, as a verb's declaration names it (`-> Count`): a marker type made
/// by `replies!`, so a typed method, the decode and the schema all follow from the name.
pub trait ReplyShape {
    /// What a typed [`Verbs`] method returns (`()` for a variant without a value).
    type Out;
    /// The JSON form on the wire: what the reply is decoded from and what the schema describes.
    type Wire: DeserializeOwned + JsonSchema;
    /// The value, if `reply` is this variant; else `reply` back (a connector's wrong answer).
    fn take(reply: Reply) -> Result<Self::Out, Reply>;
    /// The reply a decoded wire value is.
    fn wrap(wire: Self::Wire) -> Reply;
}

/// Decodes `ok` into `S`'s wire type, then the reply; `Err` names the bad field's path (none
/// for the value itself) and the rule it breaks.
fn decode<S: ReplyShape>(ok: Value) -> Result<Reply, String> {
    replies::de::<S::Wire>(ok).map(S::wrap)
}

replies! {
    /// `hello`'s answer.
    Hello(Identity) = Identity,
    /// No value (`connect`, `disconnect`): `{}` on the wire.
    Unit = Empty,
    /// A new job's id.
    Id(String) = JobId,
    Jobs(Vec<BrowsedJob>) = Vec<BrowsedJob>,
    Count(i64) = replies::Count,
    Claim(Option<Claimed>) = Option<Claimed>,
    Done(bool) = bool,
    Retry(RetryOutcome) = RetryOutcome,
    Probe(Vec<i64>) = Vec<i64>,
}

verbs! {
    /// The connector's identity, and the protocol it speaks.
    Hello hello -> Hello {
        protocol: u32 [arg = 1],
    }, typed {
        /// `hello` with protocol 1.
        fn hello() => Request::Hello { protocol: 1 };
    }
    /// Opens a session on an engine, reading the fence first (SPEC §3).
    Connect connect -> Unit {
        session: String,
        // `connect` may name a url (to pin R9.1); without one it is the case's database.
        url: String [arg = "", check connect_url(url, *cluster, ca_file.as_deref(), sentinel.as_ref())],
        /// The url names a cluster's seed node (SPEC R8.1); absent on a single engine.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cluster: bool,
        /// The PEM file of the CAs a `rediss://` session trusts (SPEC R10.1); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<String> [arg = Value::Null],
        /// The Sentinel deployment whose first Sentinel the url names (SPEC R11.1); absent on
        /// every other engine.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sentinel: Option<crate::protocol::sentinel::Sentinels>,
    }, typed {
        /// Opens `session` on `target` (the connector reads the fence first): a url for a
        /// single engine, or an [`crate::engine::Target`] that may name a cluster or a CA.
        fn connect(session: &str, target: impl Into<crate::engine::Target>) => {
            Request::connect(session, &target.into())
        };
    }
    /// Closes a session.
    Disconnect disconnect -> Unit {
        session: String,
    }
    /// Enqueues one job; replies its id.
    Enqueue enqueue -> Id, script "enqueue" {
        session: String,
        queue: String [arg, check validate_queue(queue)],
        payload: String [arg = ""],
        delay_ms: i64 [arg = 0, in 0..=MAX_MS],
    }
    /// Pending ids in claim order, with payloads.
    Browse browse -> Jobs {
        session: String,
        queue: String [arg, check validate_queue(queue)],
        offset: i64 [arg = 0, in 0..=MAX_INT],
        limit: i64 [arg = 100, in 0..=MAX_INT],
    }
    /// `ZCARD` of pending.
    PendingSize pending_size -> Count {
        session: String,
        queue: String [arg, check validate_queue(queue)],
    }
    /// Claims the oldest pending job.
    Claim claim -> Claim, script "claim" {
        session: String,
        queue: String [arg, check validate_queue(queue)],
        lease_ms: i64 [arg = 30_000, in 0..=MAX_MS],
    }
    /// Completes a claimed job if the token still holds.
    Complete complete -> Done, script "complete" {
        session: String,
        queue: String [arg, check validate_queue(queue)],
        id: String [arg, check validate_id(id)],
        attempts: i64 [arg, in 0..=MAX_INT],
    }
    /// Retries (or buries) a claimed job.
    Retry retry -> Retry, script "retry" {
        session: String,
        queue: String [arg, check validate_queue(queue)],
        id: String [arg, check validate_id(id)],
        attempts: i64 [arg, in 0..=MAX_INT],
        backoff_ms: i64 [arg = 0, in 0..=MAX_MS],
        max_attempts: i64 [arg = 3, in 1..=MAX_INT],
    }
    /// Moves due delayed jobs to pending.
    Promote promote -> Count, script "promote" {
        session: String,
        queue: String [arg, check validate_queue(queue)],
        limit: i64 [arg = 100, in 0..=MAX_INT],
    }
    /// Moves expired leases back to pending, or to dead.
    Reap reap -> Count, script "reap" {
        session: String,
        queue: String [arg, check validate_queue(queue)],
        max_attempts: i64 [arg = 3, in 1..=MAX_INT],
        limit: i64 [arg = 100, in 0..=MAX_INT],
    }
    /// `n` pipelined `INCR key` replies.
    PipelineProbe pipeline_probe -> Probe {
        session: String,
        key: String [arg, check probe_key(key)],
        n: i64 [arg, in 1..=1_000_000],
    }
    /// `n` enqueues in pipelines of `depth`.
    Batch batch -> Count, script "enqueue" {
        session: String,
        queue: String [arg, check validate_queue(queue), check batch_queues(queue, queues)],
        n: i64 [arg, in 1..=10_000_000],
        depth: i64 [arg, in 1..=100_000],
        payload: String [arg = ""],
        /// Absent (all to `queue`) or 1 to 64 names, enqueue `i` to `queues[i % len]`; never null (SPEC R4.12).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "Vec<String>", length(min = 1, max = 64))]
        queues: Option<Vec<String>> [arg = Value::Null],
    }, typed {
        /// `n` enqueues to `queue` in pipelines of `depth`.
        fn batch(session: &str, queue: &str, n: i64, depth: i64, payload: &str) => Request::Batch {
            session: session.into(),
            queue: queue.into(),
            n,
            depth,
            payload: payload.into(),
            queues: None,
        };
        /// `n` enqueues spread over `queues` (enqueue `i` to `queues[i % len]`), in pipelines
        /// of `depth`.
        fn batch_over(session: &str, queues: &[String], n: i64, depth: i64, payload: &str) => {
            Request::Batch {
                session: session.into(),
                queue: queues.first().cloned().unwrap_or_default(),
                n,
                depth,
                payload: payload.into(),
                queues: Some(queues.to_vec()),
            }
        };
    }
}

/// Asks `c` for `request`'s reply as `S`'s value: every typed method ends here.
fn ask<S: ReplyShape, C: Connector + ?Sized>(
    c: &mut C,
    request: Request,
) -> Result<S::Out, ConnectorError> {
    S::take(c.call(&request)?).map_err(|got| {
        ConnectorError::internal(format!(
            "{} answered with the wrong shape: {got:?}",
            request.cmd()
        ))
    })
}

impl Cmd {
    /// The verb whose wire name is `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The verbs that run a script (they mutate a queue), in SPEC §5's order.
    pub fn mutating() -> impl Iterator<Item = Cmd> {
        Self::ALL.into_iter().filter(|c| c.script().is_some())
    }
}

impl std::fmt::Display for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Request {
    /// The wire name of the request.
    pub fn cmd(&self) -> &'static str {
        self.verb().name()
    }

    /// Decodes a wire `ok` value into the reply this request expects (see [`Cmd::decode_ok`]).
    pub fn decode_ok(&self, ok: Value) -> Result<Reply, String> {
        self.verb().decode_ok(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serde_tags() {
        for c in Cmd::ALL {
            assert_eq!(Cmd::from_name(c.name()), Some(c));
        }
        assert_eq!(NAMES.len(), COUNT);
        let mutating: Vec<&str> = Cmd::mutating().map(Cmd::name).collect();
        assert_eq!(
            mutating,
            [
                "enqueue", "claim", "complete", "retry", "promote", "reap", "batch"
            ]
        );
    }

    /// A bad reply is named by the path of its bad field and the rule it breaks (one decode).
    #[test]
    fn bad_replies_are_named_by_path_and_rule() {
        use serde_json::json;
        let bad = |c: Cmd, v: Value| c.decode_ok(v).unwrap_err();
        let claimed = json!({"id": "j0000000000000001", "payload": "p", "attempts": "1"});
        let jobs = json!([{"id": "j0000000000000001", "payload": ""}, {"id": "j1", "payload": ""}]);
        for (got, want) in [
            (
                bad(Cmd::Claim, claimed),
                "field \"attempts\": invalid type: string \"1\", expected i64",
            ),
            (
                bad(Cmd::PendingSize, json!("lots")),
                "invalid type: string \"lots\", expected i64",
            ),
            (
                bad(Cmd::Retry, json!("Dead")),
                "unknown variant `Dead`, expected one of `delayed`, `dead`, `stale`",
            ),
            (
                bad(Cmd::Browse, jobs),
                "field \"[1].id\": invalid value: string \"j1\", expected a job id: j and 16 digits, 17 characters (SPEC R4.5)",
            ),
            // SPEC R4.5: the id a `$`-anchored pattern lets through in several dialects.
            (
                bad(Cmd::Enqueue, json!("j0000000000000001\n")),
                "invalid value: string \"j0000000000000001\\n\", expected a job id: j and 16 digits, 17 characters (SPEC R4.5)",
            ),
            (
                bad(
                    Cmd::Claim,
                    json!({"id": "j0000000000000001", "payload": "p"}),
                ),
                "missing field `attempts`",
            ),
            (
                bad(Cmd::Connect, json!({"x": 1})),
                "field \"x\": unknown field `x`, there are no fields",
            ),
            (
                bad(Cmd::Promote, json!(-1)),
                "invalid value: integer `-1`, expected a count, an integer >= 0",
            ),
        ] {
            assert_eq!(got, want);
        }
        assert_eq!(Cmd::Claim.decode_ok(Value::Null), Ok(Reply::Claim(None)));
        assert_eq!(Cmd::Connect.decode_ok(json!({})), Ok(Reply::Unit));
        assert_eq!(
            Cmd::PipelineProbe.decode_ok(json!([1, 2, 3])),
            Ok(Reply::Probe(vec![1, 2, 3]))
        );
    }

    #[test]
    fn every_verb_but_hello_names_a_session() {
        let hello = Request::Hello { protocol: 1 };
        assert_eq!(hello.session(), None);
        let d = Request::Disconnect {
            session: "s1".into(),
        };
        assert_eq!(d.session(), Some("s1"));
        assert_eq!((hello.queue(), d.queue()), (None, None));
        let mut p = Request::PendingSize {
            session: "s1".into(),
            queue: "q1".into(),
        };
        assert_eq!(p.queue(), Some("q1"));
        *p.queue_mut().unwrap() = "q2".into();
        assert_eq!(p.queue(), Some("q2"));
    }

    #[test]
    fn case_args_skip_what_the_runner_fills() {
        let names = |c: Cmd| c.args().iter().map(|a| a.name).collect::<Vec<_>>();
        assert_eq!(names(Cmd::Connect), ["url", "ca_file"]);
        assert_eq!(names(Cmd::Disconnect), Vec::<&str>::new());
        assert_eq!(
            names(Cmd::Batch),
            ["queue", "n", "depth", "payload", "queues"]
        );
        let q = &Cmd::Batch.args()[4];
        assert_eq!(
            (q.kind, q.default.clone()),
            (ArgKind::StrList, Some(Value::Null))
        );
        assert_eq!(Cmd::Claim.args()[1].range, Some((0, MAX_MS)));
    }
}
