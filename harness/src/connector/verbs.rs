//! Every wire verb (SPEC §5), declared once: its name, its typed arguments with their bounds and
//! case defaults, the shape of its reply, and the script it runs. The [`Request`] enum, its
//! argument checks ([`Request::check_args`]), the one match that hands it to a [`Handler`]
//! (the reference connector, the model), reply decoding ([`Request::decode_ok`]), the case
//! files' argument table ([`Cmd::args`]), the schema's reply map and G8's mutating verbs
//! ([`Cmd::script`]) all follow from the one `verbs!` invocation below.
//!
//! A field's options, in brackets after its type:
//! - `arg`: a case file names it (required); `arg = d`: a case may leave it out, `d` then;
//!   a field without `arg` (`session`, `cluster`) the case runner fills in;
//! - `in lo..=hi`: its bound, checked before a byte is sent (kind `invalid`);
//! - `check f(..)`: any other rule; the expression sees every field of the request by reference.
//!
//! Checks run in field order, each field's in the order written.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::connector::Reply;
use crate::connector::args::{MAX_MS, batch_queues, connect_url, probe_key, range};
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

/// The shape of a verb's `ok` value: which [`Reply`] variant it decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Hello,
    Unit,
    Id,
    Jobs,
    Count,
    Claim,
    Done,
    Retry,
    Probe,
}

impl Shape {
    /// Decodes a wire `ok` value of this shape.
    pub fn decode(self, ok: Value) -> Result<Reply, String> {
        fn de<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
            serde_json::from_value(v).map_err(|e| e.to_string())
        }
        Ok(match self {
            Self::Hello => Reply::Hello(de(ok)?),
            Self::Unit => match ok {
                Value::Object(m) if m.is_empty() => Reply::Unit,
                Value::Null => Reply::Unit,
                other => return Err(format!("expected {{}}, got {other}")),
            },
            Self::Id => Reply::Id(de(ok)?),
            Self::Jobs => Reply::Jobs(de(ok)?),
            Self::Count => Reply::Count(de(ok)?),
            Self::Claim => Reply::Claim(de(ok)?),
            Self::Done => Reply::Done(de(ok)?),
            Self::Retry => Reply::Retry(de(ok)?),
            Self::Probe => Reply::Probe(de(ok)?),
        })
    }
}

/// A field's case-table entry, from its options (`None`: not a case argument): munched left
/// to right into (is an argument, default, range).
macro_rules! case_arg {
    ($f:ident $ty:ty; $($opt:tt)*) => { case_arg!(@ $f $ty, no, None, None; $($opt)*) };
    (@ $f:ident $ty:ty, no, $d:expr, $r:expr;) => { None };
    (@ $f:ident $ty:ty, yes, $d:expr, $r:expr;) => {
        Some(Arg { name: stringify!($f), kind: <$ty as CaseKind>::KIND, default: $d, range: $r })
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; arg $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, yes, $d, $r; $($($rest)*)?)
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; arg = $nd:expr $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, yes, Some(Value::from($nd)), $r; $($($rest)*)?)
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; in $nr:expr $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, $a, $d, Some((*($nr).start(), *($nr).end())); $($($rest)*)?)
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; check $e:expr $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, $a, $d, $r; $($($rest)*)?)
    };
}

/// A field's checks, from its options, in the order written.
macro_rules! field_checks {
    ($f:ident;) => {};
    ($f:ident; arg $(, $($rest:tt)*)?) => { field_checks!($f; $($($rest)*)?) };
    ($f:ident; arg = $d:expr $(, $($rest:tt)*)?) => { field_checks!($f; $($($rest)*)?) };
    ($f:ident; in $r:expr $(, $($rest:tt)*)?) => {
        let r = $r;
        range(stringify!($f), i64::from(*$f), *r.start(), *r.end())?;
        field_checks!($f; $($($rest)*)?)
    };
    ($f:ident; check $e:expr $(, $($rest:tt)*)?) => {
        $e?;
        field_checks!($f; $($($rest)*)?)
    };
}

/// `Some(session)` when the fields (each given twice: matched, then bound) name a session.
macro_rules! session_field {
    () => { None };
    (session $s:ident $($rest:tt)*) => { Some($s.as_str()) };
    ($other:ident $o:ident $($rest:tt)*) => { session_field!($($rest)*) };
}

/// Declares every verb: see the module's documentation for a field's options.
macro_rules! verbs {
    ($(
        $(#[$doc:meta])*
        $Variant:ident $name:ident -> $shape:ident $(, script $script:literal)? {
            $( $(#[$fm:meta])* $f:ident : $ty:ty $([ $($opt:tt)* ])? ),* $(,)?
        }
    )*) => {
        /// One request, exactly as the wire protocol spells it (`cmd` is the tag; `seq` is added on the wire).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Request {
            $( $Variant { $( $(#[$fm])* $f: $ty, )* }, )*
        }

        /// A wire verb without its arguments.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Cmd {
            $( $(#[$doc])* $Variant, )*
        }

        /// Every verb's wire name, in SPEC §5's order.
        pub const NAMES: [&str; COUNT] = [$(stringify!($name)),*];
        /// How many verbs there are.
        pub const COUNT: usize = [$(stringify!($name)),*].len();

        impl Cmd {
            /// Every verb, in SPEC §5's order.
            pub const ALL: [Cmd; COUNT] = [$(Cmd::$Variant),*];

            /// The wire name.
            pub fn name(self) -> &'static str {
                match self { $(Cmd::$Variant => stringify!($name),)* }
            }

            /// The shape of its `ok` value.
            pub fn shape(self) -> Shape {
                match self { $(Cmd::$Variant => Shape::$shape,)* }
            }

            /// The bundle script it runs (a batch runs `enqueue`), if any: the verbs that mutate.
            pub fn script(self) -> Option<&'static str> {
                match self { $(Cmd::$Variant => None $(.or(Some($script)))?,)* }
            }

            /// The arguments a case file gives it, in wire order, with their defaults.
            pub fn args(self) -> Vec<Arg> {
                match self {
                    $(Cmd::$Variant => [$(case_arg!($f $ty; $($($opt)*)?)),*]
                        .into_iter()
                        .flatten()
                        .collect(),)*
                }
            }
        }

        /// Each verb's fields, borrowed from its [`Request`]: what a [`Handler`] method is given.
        pub mod fields {
            $(
                #[doc = concat!("The fields of `", stringify!($name), "`.")]
                #[derive(Debug, Clone, Copy)]
                pub struct $Variant<'a> { $( pub $f: &'a $ty, )* }
            )*
        }

        /// Something that answers every verb, one method each: the reference connector and the
        /// model. [`Request::handle`] is the one match over the verbs, so a new verb is a
        /// compile error in each handler until it answers it.
        pub trait Handler {
            /// What a verb's method returns.
            type Out;
            $( $(#[$doc])* fn $name(&mut self, args: fields::$Variant<'_>) -> Self::Out; )*
        }

        impl Request {
            /// Hands the request's fields to `h`'s method for its verb.
            pub fn handle<H: Handler + ?Sized>(&self, h: &mut H) -> H::Out {
                match self { $(Self::$Variant { $($f),* } => h.$name(fields::$Variant { $($f),* }),)* }
            }

            /// The session it names (`hello` names none).
            #[allow(unused_variables, reason = "only the session is read")]
            pub fn session(&self) -> Option<&str> {
                match self { $(Self::$Variant { $($f),* } => session_field!($($f $f)*),)* }
            }

            /// The verb of the request.
            pub fn verb(&self) -> Cmd {
                match self { $(Self::$Variant { .. } => Cmd::$Variant,)* }
            }

            /// Checks the arguments (not the session: that is the connector's state).
            #[allow(unused_variables, reason = "a verb's checks read only some of its fields")]
            pub fn check_args(&self) -> Result<(), ConnectorError> {
                match self {
                    $(Self::$Variant { $($f),* } => {
                        $( field_checks!($f; $($($opt)*)?); )*
                    })*
                }
                Ok(())
            }
        }
    };
}

verbs! {
    /// The connector's identity, and the protocol it speaks.
    Hello hello -> Hello {
        protocol: u32 [arg = 1],
    }
    /// Opens a session on an engine, reading the fence first (SPEC §3).
    Connect connect -> Unit {
        session: String,
        // `connect` may name a url (to pin the url rule); without one it is the case's database.
        url: String [arg = "", check connect_url(url, *cluster)],
        /// The url names a cluster's seed node (SPEC R8.1); absent on a single engine.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cluster: bool,
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
    }
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

    /// Decodes a wire `ok` value into the reply this request expects.
    pub fn decode_ok(&self, ok: Value) -> Result<Reply, String> {
        self.verb().shape().decode(ok)
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

    #[test]
    fn every_verb_but_hello_names_a_session() {
        let hello = Request::Hello { protocol: 1 };
        assert_eq!(hello.session(), None);
        let d = Request::Disconnect {
            session: "s1".into(),
        };
        assert_eq!(d.session(), Some("s1"));
    }

    #[test]
    fn case_args_skip_what_the_runner_fills() {
        let names = |c: Cmd| c.args().iter().map(|a| a.name).collect::<Vec<_>>();
        assert_eq!(names(Cmd::Connect), ["url"]);
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
