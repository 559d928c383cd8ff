//! Deliberately broken connectors, all in one place, each named for the one thing it breaks and
//! listed in [`TABLE`] with the gates that must catch it. The self-tests run every entry through
//! the gate and require exactly that (`tests/gates.rs`, `tests/interleavings.rs`,
//! `tests/case_doubles.rs`); a test also keeps the table and the tests in step.
//!
//! Two kinds, so the production reference connector holds no fault branch:
//! - **rewriters** ([`rewrite`]): wrap a correct connector and change requests or replies on the
//!   way (a short batch, an ignored token, a duplicated enqueue);
//! - **lowerings** ([`wire`]): use the reference connector's doubles-only lowering API
//!   (`Reference::connect_unfenced`, `script_load`, `raw`, `with_root`), compiled only with this
//!   feature, to send the wrong thing on the wire.
//!
//! - **rule breakers** ([`broken`]): one per numbered SPEC rule not already broken above; the rule
//!   catalogue (`crate::gates::rules`) names which double breaks which rule, and `tests/rules.rs`
//!   requires the named gates to FAIL it. Wire rules are broken by child fixtures
//!   (`harness/tests/fixtures/wire_*.py`) that forward to the Python connector.
//!
//! Child-process misbehaviour (hangs, garbage, wrong `seq`, early exits) is exercised by the
//! Python fixtures listed in [`CHILD_FIXTURES`].

pub mod broken;
pub mod cluster;
pub mod faults;
pub mod rewrite;
pub mod time;
pub mod wire;

use std::sync::Arc;

use crate::connector::child::{ChildFactory, ChildSpec};
use crate::connector::reference::{Quirks, Reference};
use crate::connector::{Connector, ConnectorFactory};
use crate::error::HarnessError;
use crate::protocol::bundle::Bundle;

/// One deliberately broken connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Double {
    /// Connects without reading (or installing) the fence.
    SkipFence,
    /// Sends scripts whose bytes differ from the bundle's (a trailing comment).
    ForeignScripts,
    /// `SCRIPT LOAD` before every call.
    LoadEveryCall,
    /// Takes any engine error of a script call for `NOSCRIPT`: `SCRIPT LOAD` and the call again.
    ReloadOnAnyError,
    /// Builds the job root without the hash tag (`emq:q:job:`).
    UntaggedRoot,
    /// `batch` sends one enqueue fewer than asked and reports the count asked.
    ShortBatch,
    /// `complete` as raw `HGET`/`ZSCORE`/`ZREM`/`DEL` instead of the script.
    RawComplete,
    /// `retry` never buries: it sends `max_attempts = i32::MAX`.
    RetryIgnoresMaxAttempts,
    /// `reap` moves every expired lease: it sends `limit = 1_000_000`.
    ReapIgnoresLimit,
    /// `complete` ignores the caller's token: it sends the latest attempts it saw claimed.
    CompleteIgnoresToken,
    /// `enqueue` sent twice, the first id reported: a job nobody knows about.
    EnqueueTwice,
    /// `pipeline_probe` and `batch` one command per round trip (right replies, no pipelining).
    Unpipelined,
    /// `disconnect` answers `{}` but the session keeps working.
    ZombieSession,
    /// Engine errors reported as kind `internal`.
    EngineAsInternal,
    /// Sends a bad queue name to the engine.
    LenientQueue,
    /// Sends an out-of-range `delay_ms`, `lease_ms` or `backoff_ms` to the engine.
    LenientMs,
    /// Sends an out-of-range `attempts` to the engine.
    LenientAttempts,
    /// Sends an out-of-range `max_attempts` to the engine.
    LenientMaxAttempts,
    /// Sends an out-of-range `limit` or `offset` to the engine.
    LenientLimitOffset,
    /// Sends a malformed job id to the engine.
    LenientId,
    /// Sends an out-of-range `n` or `depth` to the engine.
    LenientCount,
    /// Sends an empty or `emq:` probe key to the engine.
    LenientProbeKey,
    /// `browse` in reverse claim order.
    BrowseReversed,
    /// `pending_size` counts the active set too.
    PendingSizeCountsActive,
    /// Installs an absent fence with one `HSET` outside `MULTI`/`EXEC`.
    FenceHset,
    /// Refuses a fence of its own protocol with another digest.
    FenceRefusesOtherDigest,
    /// Connects through a fence of another protocol.
    FenceIgnoresProtocol,
    /// Every session shares the first session's connection.
    SharedConnection,
    /// `hello` accepts any protocol.
    HelloAnyProtocol,
    /// A verb on an unknown session runs on some connected session.
    FallbackSession,
    /// On an `engine` error, reconnects and re-sends the same script call once.
    ResendAfterLostReply,
    /// The Python connector with redis-py's default retry policy on (`--retry-on-error`): it
    /// reconnects and re-sends a command after a dropped connection.
    PythonRetryOnError,
    /// On an `engine` error, answers success for enqueue, complete and retry.
    AckUnsent,
    /// On an `engine` error, answers a made-up "nothing to do" (claim `null`, enqueue a fabricated id).
    SwallowConnectionErrors,
    /// Adds 1 500 ms to every non-zero lease, delay and backoff (a "grace period").
    AddsGrace,
    /// Rounds leases, delays and backoffs up to whole seconds.
    RoundsUpToSeconds,
    /// Treats `backoff_ms` below 1 000 as seconds.
    BackoffInSeconds,
    /// Ignores `connect`'s `cluster` flag: a plain connection to the seed node only.
    SeedNodeOnly,
    /// On a cluster, answers `NOSCRIPT` by loading the script on the seed node only.
    LoadOnSeedOnly,
    /// On a cluster, sends a batch over several queues as one pipeline to one node.
    UngroupedBatch,
    /// On a cluster, never follows `MOVED`/`ASK` (and never reads the slot map again).
    NoRedirects,
}

/// A double, what it breaks, and where the gate must catch it.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub double: Double,
    /// The SPEC rule it breaks, in words.
    pub breaks: &'static str,
    /// The gates that must FAIL it; every other gate must PASS it (G6 and G7 are judged by
    /// `cases` and `interleavings` below, not by the gate self-test).
    pub gates: &'static [&'static str],
    /// True when it must fail some G6 cases (the exact list is `tests/case_doubles/<name>.txt`).
    pub cases: bool,
    /// True when G7's histories must catch it.
    pub interleavings: bool,
    /// Why a gate beyond the obvious one fails too, when it does.
    pub why_also: &'static str,
    /// True for a double of SPEC §8: `gates` fail it on `--engine cluster`, and on a single
    /// engine it passes every gate (it is the reference there).
    pub cluster: bool,
}

/// Every double with the gates that must catch it.
pub const TABLE: &[Entry] = &[
    Entry {
        double: Double::SkipFence,
        breaks: "SPEC §3: every connect reads the fence first",
        gates: &["G1"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::ForeignScripts,
        breaks: "SPEC §4: bundle SHAs only",
        gates: &["G2", "G8"],
        cases: false,
        interleavings: false,
        why_also: "G8: only the bundle's scripts may change EchoMQ keys, and these are not the bundle's",
        cluster: false,
    },
    Entry {
        double: Double::LoadEveryCall,
        breaks: "SPEC §4: EVALSHA first, one SCRIPT LOAD per miss",
        gates: &["G3"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::ReloadOnAnyError,
        breaks: "R4.9: only a NOSCRIPT reply (its prefix) is a miss; an engine error costs no load and no second run",
        gates: &["G3"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::UntaggedRoot,
        breaks: "SPEC §2: every key a script touches is a KEY or under the tagged ARGV[1] root",
        gates: &["G4", "G8"],
        cases: true,
        interleavings: false,
        why_also: "G8: the untagged hashes are keys outside the grammar, so the accounting finds members without their hash",
        cluster: false,
    },
    Entry {
        double: Double::ShortBatch,
        breaks: "SPEC §4: a pipelined batch lands whole",
        gates: &["G5", "G8"],
        cases: true,
        interleavings: false,
        why_also: "G8: a batch acknowledged with n made n - 1 jobs carrying its token, a lost job",
        cluster: false,
    },
    Entry {
        double: Double::RawComplete,
        breaks: "SPEC §4: every transition is EVALSHA of a bundle script (command discipline)",
        gates: &["G8", "G3"],
        cases: false,
        interleavings: false,
        why_also: "G3: a complete that is not an EVALSHA leaves fewer EVALSHA than transitions",
        cluster: false,
    },
    Entry {
        double: Double::RetryIgnoresMaxAttempts,
        breaks: "SPEC §2: retry buries a job at max_attempts",
        gates: &[],
        cases: true,
        interleavings: true,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::ReapIgnoresLimit,
        breaks: "SPEC §2: reap moves at most `limit` jobs",
        gates: &[],
        cases: true,
        interleavings: true,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::CompleteIgnoresToken,
        breaks: "SPEC §1: a stale fencing token changes nothing",
        gates: &[],
        cases: true,
        interleavings: true,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::EnqueueTwice,
        breaks: "SPEC §4: no job duplicated",
        gates: &["G8"],
        cases: true,
        interleavings: true,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::Unpipelined,
        breaks: "R4.11, R4.12: the probe and the batch are pipelined (many commands per write)",
        gates: &["G5"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::ZombieSession,
        breaks: "R5.10: after disconnect the session is unknown",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::EngineAsInternal,
        breaks: "R5.4: an engine error is kind engine",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientQueue,
        breaks: "R1.1: a bad queue name is invalid before a byte is sent",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientMs,
        breaks: "R4.1: delay_ms, lease_ms, backoff_ms in 0..=10^12",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientAttempts,
        breaks: "R4.2: attempts in 0..=2147483647",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientMaxAttempts,
        breaks: "R4.3: max_attempts in 1..=2147483647",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientLimitOffset,
        breaks: "R4.4: limit and offset in 0..=2147483647",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientId,
        breaks: "R4.5: ids match ^j[0-9]{16}$",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientCount,
        breaks: "R4.6: n and depth within their bounds",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::LenientProbeKey,
        breaks: "R4.7: the probe key is non-empty and outside emq:",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::BrowseReversed,
        breaks: "R2.5: browse lists ids in claim order",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::PendingSizeCountsActive,
        breaks: "R2.6: pending_size is ZCARD of the pending set",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::FenceHset,
        breaks: "R3.2: an absent fence is installed with HSETNX inside MULTI/EXEC",
        gates: &["G1", "G8"],
        cases: false,
        interleavings: false,
        why_also: "G8: HSET on emq:fence is outside the command discipline (only HSETNX installs)",
        cluster: false,
    },
    Entry {
        double: Double::FenceRefusesOtherDigest,
        breaks: "R3.3: another digest of the same protocol is a warning, not an error",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::FenceIgnoresProtocol,
        breaks: "R3.4: a fence of another protocol refuses the connect",
        gates: &["G1"],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::SharedConnection,
        breaks: "R5.7: every session has its own engine connection",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::HelloAnyProtocol,
        breaks: "R5.5: hello of another protocol is unsupported",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::FallbackSession,
        breaks: "R4.8: a verb on an unknown session is invalid",
        gates: &[],
        cases: true,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::ResendAfterLostReply,
        breaks: "SPEC §4: never re-send a script call unless the first provably did not run",
        gates: &["G8", "G3"],
        cases: false,
        interleavings: false,
        why_also: "G3: it re-sends after an engine error reply too, so a WRONGTYPE costs two EVALSHA",
        cluster: false,
    },
    Entry {
        double: Double::PythonRetryOnError,
        breaks: "SPEC §4: never re-send a script call unless the first provably did not run",
        gates: &["G8"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::AckUnsent,
        breaks: "SPEC §4: a call whose connection failed surfaces kind engine, never a success",
        gates: &["G8"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::SwallowConnectionErrors,
        breaks: "SPEC §4: a call whose connection failed surfaces kind engine, never a made-up reply",
        gates: &["G8"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::AddsGrace,
        breaks: "R1.6: a timed score is the engine's time of the call plus the given ms, exactly",
        gates: &[],
        cases: true,
        interleavings: true,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::RoundsUpToSeconds,
        breaks: "R1.6: a timed score is the engine's time of the call plus the given ms, exactly",
        gates: &[],
        cases: true,
        interleavings: true,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::BackoffInSeconds,
        breaks: "R1.6: a timed score is the engine's time of the call plus the given ms, exactly",
        gates: &[],
        cases: true,
        interleavings: true,
        why_also: "",
        cluster: false,
    },
    Entry {
        double: Double::SeedNodeOnly,
        breaks: "R8.1: on a cluster, a cluster client that routes every call by slot (on one node: the reference)",
        gates: &["G1", "G3", "G4", "G5", "G8"],
        cases: false,
        interleavings: false,
        why_also: "G1, G4, G5, G8: every call on a key of another primary gets MOVED, so their workloads fail",
        cluster: true,
    },
    Entry {
        double: Double::LoadOnSeedOnly,
        breaks: "R8.2: NOSCRIPT is answered by SCRIPT LOAD on the node that said it (on one node: the reference)",
        gates: &["G1", "G3", "G4", "G5", "G8"],
        cases: false,
        interleavings: false,
        why_also: "G1, G4, G5, G8: the scripts never reach the other primaries, so every script call there fails",
        cluster: true,
    },
    Entry {
        double: Double::UngroupedBatch,
        breaks: "R8.3: a batch over queues on several nodes is split by node (on one node: the reference)",
        gates: &["G5"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: true,
    },
    Entry {
        double: Double::NoRedirects,
        breaks: "R8.1, R8.4: MOVED is followed, also after a failover (on one node: the reference)",
        gates: &["G8"],
        cases: false,
        interleavings: false,
        why_also: "",
        cluster: true,
    },
];

impl Double {
    /// Every double, in table order.
    pub fn all() -> impl Iterator<Item = Double> {
        TABLE.iter().map(|e| e.double)
    }

    /// Its table entry.
    pub fn entry(self) -> &'static Entry {
        TABLE
            .iter()
            .find(|e| e.double == self)
            .expect("every double has a table entry")
    }

    /// A fresh, unconnected instance over `bundle`.
    pub fn make(self, bundle: &Bundle) -> Box<dyn Connector + Send> {
        use broken::{Check, Lenient};
        use rewrite::{Rewrite, Rewriter};
        let reference = || Reference::new(bundle);
        let lenient = |check| -> Box<dyn Connector + Send> {
            Box::new(Lenient {
                inner: reference(),
                check,
            })
        };
        match self {
            Self::SkipFence => Box::new(wire::SkipFence(reference())),
            Self::ForeignScripts => Box::new(Reference::new(&wire::patched(bundle))),
            Self::LoadEveryCall => Box::new(wire::LoadEveryCall(reference())),
            Self::ReloadOnAnyError => Box::new(wire::ReloadOnAnyError(reference())),
            Self::UntaggedRoot => Box::new(reference().with_root(wire::untagged_root)),
            Self::RawComplete => Box::new(wire::RawComplete(reference())),
            Self::ShortBatch => Box::new(Rewriter::new(reference(), Rewrite::ShortBatch)),
            Self::RetryIgnoresMaxAttempts => {
                Box::new(Rewriter::new(reference(), Rewrite::RetryIgnoresMaxAttempts))
            }
            Self::ReapIgnoresLimit => {
                Box::new(Rewriter::new(reference(), Rewrite::ReapIgnoresLimit))
            }
            Self::CompleteIgnoresToken => {
                Box::new(Rewriter::new(reference(), Rewrite::CompleteIgnoresToken))
            }
            Self::EnqueueTwice => Box::new(Rewriter::new(reference(), Rewrite::EnqueueTwice)),
            Self::Unpipelined => Box::new(broken::Unpipelined(reference())),
            Self::ZombieSession => Box::new(broken::ZombieSession {
                inner: reference(),
                connected: Default::default(),
            }),
            Self::EngineAsInternal => Box::new(broken::EngineAsInternal(reference())),
            Self::LenientQueue => lenient(Check::Queue),
            Self::LenientMs => lenient(Check::Ms),
            Self::LenientAttempts => lenient(Check::Attempts),
            Self::LenientMaxAttempts => lenient(Check::MaxAttempts),
            Self::LenientLimitOffset => lenient(Check::LimitOffset),
            Self::LenientId => lenient(Check::Id),
            Self::LenientCount => lenient(Check::Count),
            Self::LenientProbeKey => lenient(Check::ProbeKey),
            Self::BrowseReversed => Box::new(broken::BrowseReversed(reference())),
            Self::PendingSizeCountsActive => Box::new(broken::PendingSizeCountsActive(reference())),
            Self::FenceHset => Box::new(broken::FenceHset {
                inner: reference(),
                protocol: bundle.manifest.protocol.to_string(),
                bundle: bundle.manifest.bundle.clone(),
                digest: bundle.manifest.digest.clone(),
            }),
            Self::FenceRefusesOtherDigest => Box::new(broken::FenceRefusesOtherDigest {
                inner: reference(),
                digest: bundle.manifest.digest.clone(),
            }),
            Self::FenceIgnoresProtocol => Box::new(broken::FenceIgnoresProtocol(reference())),
            Self::SharedConnection => Box::new(broken::SharedConnection {
                inner: reference(),
                shared: None,
            }),
            Self::HelloAnyProtocol => Box::new(broken::HelloAnyProtocol(reference())),
            Self::FallbackSession => Box::new(broken::FallbackSession {
                inner: reference(),
                connected: Default::default(),
            }),
            Self::ResendAfterLostReply => Box::new(faults::ResendAfterError::new(reference())),
            Self::AckUnsent => Box::new(faults::AckUnsent::new(reference())),
            Self::SwallowConnectionErrors => Box::new(faults::SwallowErrors(reference())),
            Self::PythonRetryOnError => match python_retry_factory() {
                Some(f) => f
                    .make()
                    .unwrap_or_else(|e| Box::new(faults::Unavailable(e.to_string()))),
                None => Box::new(faults::Unavailable(
                    "no Python connector (set EMQ_PYTHON_CONNECTOR)".into(),
                )),
            },
            Self::AddsGrace => Box::new(time::Skewed::new(reference(), time::TimeSkew::AddsGrace)),
            Self::RoundsUpToSeconds => Box::new(time::Skewed::new(
                reference(),
                time::TimeSkew::RoundsUpToSeconds,
            )),
            Self::BackoffInSeconds => Box::new(time::Skewed::new(
                reference(),
                time::TimeSkew::BackoffInSeconds,
            )),
            Self::SeedNodeOnly => Box::new(cluster::SeedNodeOnly(reference())),
            Self::LoadOnSeedOnly => Box::new(reference().with_quirks(Quirks {
                load_on_seed: true,
                ..Quirks::default()
            })),
            Self::UngroupedBatch => Box::new(reference().with_quirks(Quirks {
                ungrouped_batches: true,
                ..Quirks::default()
            })),
            Self::NoRedirects => Box::new(reference().with_quirks(Quirks {
                no_redirects: true,
                ..Quirks::default()
            })),
        }
    }

    /// A factory of this double.
    pub fn factory(self, bundle: &Arc<Bundle>) -> Box<dyn ConnectorFactory> {
        if let (Self::PythonRetryOnError, Some(f)) = (self, python_retry_factory()) {
            return Box::new(f);
        }
        let bundle = bundle.clone();
        Box::new(move || -> Result<Box<dyn Connector + Send>, HarnessError> {
            Ok(self.make(&bundle))
        })
    }
}

/// The Python connector with `--retry-on-error`, when it is provisioned, running this
/// repository's `connectors/python` package.
fn python_retry_factory() -> Option<ChildFactory> {
    let program = faults::python_connector()?;
    // This repository's package first, whichever checkout the venv was installed from.
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../connectors/python");
    Some(ChildFactory::new(
        ChildSpec::new([
            program.display().to_string(),
            "--retry-on-error".to_string(),
        ])
        .with_env("PYTHONPATH", package.display().to_string()),
    ))
}

/// A misbehaving child process (`harness/tests/fixtures/<file>`), what it does wrong, and the
/// test in `tests/child.rs` that shows the harness stays bounded and says so.
pub const CHILD_FIXTURES: &[(&str, &str)] = &[
    ("hang.py", "reads the first request and never answers"),
    ("garbage.py", "answers hello, then a non-JSON line"),
    ("wrong_seq.py", "answers with the previous request's seq"),
    ("crash.py", "dies of SIGSEGV on the second request"),
    ("exit_after_hello.py", "exits with status 3 after hello"),
    (
        "slow_start.py",
        "sleeps 1.5 s before hello (must be tolerated)",
    ),
    ("flood_stderr.py", "writes 5000 lines to stderr and dies"),
    ("grandchild.py", "leaves a grandchild in its process group"),
    ("chatty.py", "answers hello with two lines"),
    (
        "quirky.py",
        "wrong shapes, unknown error kinds, empty messages",
    ),
];
