//! Deliberately broken connectors, all in one place, each named for the one thing it breaks and
//! listed in [`TABLE`]. Which gates must FAIL each is declared once: the rule catalogue
//! (`crate::gates::rules`) names the doubles that break each rule and the gates that enforce it,
//! and a table entry adds the gates that fail it for another reason (`also`). The self-tests run
//! every double through those gates (`tests/gates.rs`, generated from them; `tests/rules.rs`,
//! `tests/interleavings.rs`, `tests/case_doubles.rs`).
//!
//! The names ([`Double`]) and the table compile always; the connectors only with the feature
//! `doubles`. The production reference connector's only departures are
//! `crate::connector::reference::Quirks` flags, all off outside a double. Eight kinds, one module
//! each:
//! - **rewriters** (`rewrite`): wrap a correct connector and change requests or replies on the
//!   way (a short batch, an ignored token, a duplicated enqueue);
//! - **lowerings** (`wire`): use the reference connector's doubles-only lowering API
//!   (`Reference::connect_unfenced`, `script_load`, `raw`, `with_root`), compiled only with this
//!   feature, to send the wrong thing on the wire;
//! - **rule breakers** (`broken`): one per numbered SPEC rule not already broken elsewhere. Wire
//!   rules are broken by child fixtures (`harness/tests/fixtures/wire_*.py`, named by the ways
//!   of the catalogue's rules) that forward to the Python connector; the `Strict` doubles refuse
//!   valid input beyond SPEC (the other side of each refusal rule);
//! - **fault mishandlers** (`faults`): a failed connection answered wrongly (a re-send, a made-up
//!   success), what G8's fault phase catches; with the Python connector's broken-on-purpose flags;
//! - **wrong time** (`time`): a lease, delay or backoff off by a little (a grace period, a
//!   rounding, a ms↔s mix-up, a margin taken off), caught by scores judged to the millisecond;
//! - **cluster breakers** (`cluster`, and `Quirks` flags): SPEC §8 (R8.10 and R8.11 too: a
//!   session that gives up after a lost connection, an enqueue re-sent after a reset, `READONLY`
//!   taken as final, a slot map kept after a node died), the reference on one node
//!   (`redial_unfenced` breaks R3.5 as `silent_reconnect` does, the two `leak_on_*` break R5.13;
//!   four `Quirks` flags break §4 instead: `incrby_probe`, redis-py's `incr()` in the probe;
//!   `noscript_lands`, Debian's eredis reading a split `NOSCRIPT` as a value; `eval_on_noscript`,
//!   redigo's `Script.Do`; `preload_only`, scripts loaded at connect and never again);
//! - **ACL breakers** (`acl`): a command outside SPEC R4.19's list, the url's user ignored;
//!   the engine's least-privilege user refuses them and G1's `ACL LOG` check (after every gate)
//!   names them;
//! - **a failure that does not reproduce** (`flaky`): one wrong reply in a factory's life, for
//!   G7's replay verdict (`tests/interleavings.rs`).
//!
//! Child-process misbehaviour (hangs, garbage, wrong `seq`, early exits) is exercised by the
//! Python fixtures listed in [`CHILD_FIXTURES`].

// The connectors themselves only with the feature; the names and the table always (the rule
// catalogue names the doubles that break each rule, and `emq-gate rules` prints them).
#[cfg(feature = "doubles")]
pub mod acl;
#[cfg(feature = "doubles")]
pub mod broken;
#[cfg(feature = "doubles")]
pub mod cluster;
#[cfg(feature = "doubles")]
pub mod faults;
#[cfg(feature = "doubles")]
pub mod flaky;
pub mod permits;
#[cfg(feature = "doubles")]
pub mod rewrite;
mod table;
#[cfg(feature = "doubles")]
pub mod time;
#[cfg(feature = "doubles")]
pub mod tls;
#[cfg(feature = "doubles")]
pub mod wire;

pub use table::{Entry, TABLE};

#[cfg(feature = "doubles")]
use std::sync::Arc;

#[cfg(feature = "doubles")]
use crate::connector::child::{ChildFactory, ChildSpec};
#[cfg(feature = "doubles")]
use crate::connector::reference::{Ask, Quirks, Reference};
#[cfg(feature = "doubles")]
use crate::connector::{Connector, ConnectorFactory};
#[cfg(feature = "doubles")]
use crate::error::HarnessError;
#[cfg(feature = "doubles")]
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
    /// Answers `NOSCRIPT` with `EVAL` of the script's source, as redigo's `Script.Do` does.
    EvalOnNoscript,
    /// Loads the six scripts once, at connect, and reports a later `NOSCRIPT` as the call's error.
    PreloadOnly,
    /// Builds the job root without the hash tag (`emq:q:job:`).
    UntaggedRoot,
    /// `batch` sends one enqueue fewer than asked and reports the count asked.
    ShortBatch,
    /// After a failed verb, the next verb on the session dials anew without the fence read.
    RedialUnfenced,
    /// `disconnect` forgets the session but leaves its connection open.
    LeakOnDisconnect,
    /// `connect` of a connected session leaves the old connection open.
    LeakOnReconnect,
    /// A 2.5 s read timeout; a call that times out leaves its connection open, abandoned, and the
    /// session goes on over a new one.
    AbandonOnTimeout,
    /// On `rediss://`, verifies no certificate (redis-rs's `#insecure`).
    TrustAnyCertificate,
    /// On `rediss://`, verifies the chain and not the name (redis-rs's
    /// `set_danger_accept_invalid_hostnames`).
    NameUnchecked,
    /// On a `rediss://` cluster, verifies the seed's certificate and no other node's (the TLS
    /// options given to the seed only).
    TrustOnSeedOnly,
    /// Takes a `rediss://` url as `redis://`: plaintext to a TLS server.
    PlaintextOnRediss,
    /// Does not read `ca_file` before connecting: one that cannot be read falls back to the
    /// system's trust store, and the connect fails with kind `engine`, not `invalid`.
    CaFileUnchecked,
    /// `batch` writes pipelines twice as deep as asked (everything lands; the depth is broken).
    DeepBatch,
    /// `batch` writes pipelines half as deep as asked (everything lands; the depth is broken).
    ShallowBatch,
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
    /// `pipeline_probe` pipelines `INCRBY key 1` (redis-py's `incr()`): right replies, not `INCR`.
    IncrByProbe,
    /// `batch` counts an enqueue that answered `NOSCRIPT` as landed and never sends it again
    /// (Debian's eredis 1.2 reads a split error reply as a value).
    NoscriptLandsInBatch,
    /// `disconnect` answers `{}` but the session keeps working.
    ZombieSession,
    /// Engine errors reported as kind `internal`.
    EngineAsInternal,
    /// Sends `INFO server` on the session's connection after each connect (a library's version
    /// probe): a command outside SPEC R4.19's list, refused to the connector's user.
    InfoAtConnect,
    /// Ignores the url's user: `AUTH <password>` alone, as the `default` user, which is off, so
    /// it cannot connect (R4.19).
    AuthWithoutUser,
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
    /// Accepts a queue name or an id with one trailing newline (`^...$` in Python or Ruby).
    DollarAnchored,
    /// Sends an out-of-range `n` or `depth` to the engine.
    LenientCount,
    /// Sends an empty or `emq:` probe key to the engine.
    LenientProbeKey,
    /// Refuses probe keys that only look reserved (`EMQ:x`, `emqx`): stricter than R4.7.
    StrictProbeKey,
    /// Refuses session names outside `[A-Za-z0-9_-]{1,64}`: stricter than SPEC R5.10.
    StrictSessionName,
    /// Refuses the well-formed id `j0000000000000000`: stricter than R4.5.
    StrictIdZero,
    /// Refuses queue names with a `.` (a `[\w-]` check): stricter than R1.1.
    StrictQueueDot,
    /// Refuses milliseconds above the int32 maximum: stricter than R4.1.
    StrictMsInt32,
    /// Refuses `attempts` 0 (a token taken to start at 1): stricter than R4.2.
    StrictAttemptsZero,
    /// Refuses `limit` 0: stricter than R4.4.
    StrictLimitZero,
    /// `browse` returns one id more than `limit` (`ZRANGE key offset offset+limit`).
    BrowseOneMore,
    /// `browse` returns at most 1 000 rows, whatever `limit` asks (a library's page).
    BrowseCapsAt1000,
    /// `promote` moves at most 100, whatever `limit` asks (a ceiling of the connector's own).
    PromoteCapsAt100,
    /// `reap` moves at most 100, whatever `limit` asks (a ceiling of the connector's own).
    ReapCapsAt100,
    /// `pipeline_probe` in pipelines of at most 1 000, one after another (right replies).
    ProbeSplitsAt1000,
    /// A fence of another protocol refuses the connect with kind `engine`, not `fence`.
    FenceAsEngine,
    /// Takes 250 ms off every lease, delay and backoff above it (a "safety margin").
    SubtractsMargin,
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
    /// Reference quirk: when the engine closed its connection, opens a new one on the next call
    /// and sends the script without reading the fence (a client library's silent reconnect).
    SilentReconnect,
    /// The Python connector with `--silent-reconnect`: redis-py's pool replaces a closed
    /// connection without the fence read.
    PythonSilentReconnect,
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
    /// On a cluster, connects whatever database the url names (R8.5).
    ClusterAnyDatabase,
    /// On a cluster, answers `NOSCRIPT` by loading the script on the seed node only.
    LoadOnSeedOnly,
    /// On a cluster, sends a batch over several queues as one pipeline to one node.
    UngroupedBatch,
    /// On a cluster, never follows `MOVED`/`ASK` (and never reads the slot map again).
    NoRedirects,
    /// On a cluster, sends a node's whole pipeline again on a new connection when its read
    /// failed (redis-py `ClusterPipeline`'s re-send, whatever `retry` says).
    ResendClusterPipeline,
    /// The Python connector with `--cluster-retry`: `RedisCluster`'s default retry on a
    /// connection error (`ERRORS_ALLOW_RETRY`, `cluster_error_retry_attempts`) kept.
    PythonClusterRetry,
    /// On a cluster, follows `MOVED` but reports `ASK` as the call's error (R8.6).
    IgnoresAsk,
    /// On a cluster, answers `ASK` by sending the call to the named node without `ASKING`
    /// first: the importing node answers `MOVED` back to the source (R8.6).
    AskWithoutAsking,
    /// On a cluster, answers a `NOSCRIPT` that followed a redirect by loading the script where
    /// its slot map says the slot lives, not on the node that said it (R8.2 during a migration).
    LoadsWhereSlotMapSays,
    /// On a cluster, answers a claim that met `TRYAGAIN` with "no job" (R8.7).
    TryagainAsNothing,
    /// Reference quirk on a cluster: before each script call, a `PING` of the key's node; a
    /// killed connection there is replaced by the cluster client without a fence read.
    SilentNodeReconnect,
    /// The Python connector with `--silent-node-reconnect`: on a cluster, redis-py's node pool
    /// replaces a killed connection and the session sends its script without the fence read.
    PythonSilentNodeReconnect,
    /// After its first `engine` error a session answers every later call with kind `engine`
    /// without sending it, until it is connected again: a worker loop that stopped.
    GivesUpAfterError,
    /// An `enqueue` that failed on a lost connection (reset, refused, closed) is sent once more.
    ResendEnqueueAfterReset,
    /// Reference quirk on a cluster: `READONLY` is final: the slot map stays, and the
    /// connection that said it too.
    ReadonlyFinal,
    /// Reference quirk on a cluster: a lost connection leaves the slot map (and the dead node's
    /// connection) as it was.
    StaleSlotMapAfterDeath,
}

impl Double {
    /// Every double, in table order.
    pub fn all() -> impl Iterator<Item = Double> {
        TABLE.iter().map(|e| e.double)
    }

    /// True for a double the Python connector plays (with a broken-on-purpose flag): it needs
    /// `EMQ_PYTHON_CONNECTOR`.
    /// True for a double that only a TLS cluster tells apart (its seed is verified): judged on
    /// `valkey-9.1-tls-cluster`; on a single TLS engine it is the reference.
    pub fn on_tls_cluster(self) -> bool {
        matches!(self, Self::TrustOnSeedOnly)
    }

    pub fn is_python(self) -> bool {
        matches!(
            self,
            Self::PythonRetryOnError | Self::PythonSilentReconnect | Self::PythonClusterRetry
        )
    }

    /// Its table entry.
    pub fn entry(self) -> &'static Entry {
        TABLE
            .iter()
            .find(|e| e.double == self)
            .expect("every double has a table entry")
    }

    /// A fresh, unconnected instance over `bundle`.
    // Long on purpose (#22): one flat arm per double, a table that a split would only scatter.
    #[cfg(feature = "doubles")]
    pub fn make(self, bundle: &Bundle) -> Box<dyn Connector + Send> {
        use broken::{Check, Lenient};
        use rewrite::{Rewrite, Rewriter};
        let reference = || Reference::new(bundle);
        // The reference with one departure of its `Quirks` switched on.
        let quirked = |set: fn(&mut Quirks)| -> Box<dyn Connector + Send> {
            let mut q = Quirks::default();
            set(&mut q);
            Box::new(reference().with_quirks(q))
        };
        let lenient = |check| -> Box<dyn Connector + Send> {
            Box::new(Lenient {
                inner: reference(),
                check,
            })
        };
        let strict = |what| -> Box<dyn Connector + Send> {
            Box::new(broken::Strict {
                inner: reference(),
                what,
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
            Self::DeepBatch => Box::new(Rewriter::new(reference(), Rewrite::DeepBatch)),
            Self::ShallowBatch => Box::new(Rewriter::new(reference(), Rewrite::ShallowBatch)),
            Self::BrowseOneMore => Box::new(Rewriter::new(reference(), Rewrite::BrowseOneMore)),
            Self::BrowseCapsAt1000 => {
                Box::new(Rewriter::new(reference(), Rewrite::BrowseCapsAt1000))
            }
            Self::PromoteCapsAt100 => {
                Box::new(Rewriter::new(reference(), Rewrite::PromoteCapsAt100))
            }
            Self::ReapCapsAt100 => Box::new(Rewriter::new(reference(), Rewrite::ReapCapsAt100)),
            Self::ProbeSplitsAt1000 => {
                Box::new(Rewriter::new(reference(), Rewrite::ProbeSplitsAt1000))
            }
            Self::EvalOnNoscript => quirked(|q| q.eval_on_noscript = true),
            Self::PreloadOnly => quirked(|q| q.preload_only = true),
            Self::RedialUnfenced => quirked(|q| q.redial_unfenced = true),
            Self::LeakOnDisconnect => quirked(|q| q.leak_on_disconnect = true),
            Self::TrustAnyCertificate => quirked(|q| q.tls_accept_any = true),
            Self::NameUnchecked => quirked(|q| q.tls_skip_names = true),
            Self::TrustOnSeedOnly => quirked(|q| q.tls_seed_only = true),
            Self::PlaintextOnRediss => Box::new(tls::PlaintextOnRediss(reference())),
            Self::CaFileUnchecked => Box::new(tls::CaFileUnchecked(reference())),
            Self::LeakOnReconnect => quirked(|q| q.leak_on_reconnect = true),
            Self::AbandonOnTimeout => quirked(|q| q.abandon_on_timeout = true),
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
            Self::IncrByProbe => quirked(|q| q.incrby_probe = true),
            Self::NoscriptLandsInBatch => quirked(|q| q.noscript_lands = true),
            Self::ZombieSession => Box::new(broken::ZombieSession {
                inner: reference(),
                connected: Default::default(),
            }),
            Self::EngineAsInternal => Box::new(broken::EngineAsInternal(reference())),
            Self::InfoAtConnect => Box::new(acl::InfoAtConnect(reference())),
            Self::AuthWithoutUser => Box::new(acl::AuthWithoutUser(reference())),
            Self::LenientQueue => lenient(Check::Queue),
            Self::LenientMs => lenient(Check::Ms),
            Self::LenientAttempts => lenient(Check::Attempts),
            Self::LenientMaxAttempts => lenient(Check::MaxAttempts),
            Self::LenientLimitOffset => lenient(Check::LimitOffset),
            Self::LenientId => lenient(Check::Id),
            Self::DollarAnchored => Box::new(broken::DollarAnchored(reference())),
            Self::LenientCount => lenient(Check::Count),
            Self::LenientProbeKey => lenient(Check::ProbeKey),
            Self::StrictProbeKey => strict(broken::Strictness::ProbeKey),
            Self::StrictSessionName => strict(broken::Strictness::SessionName),
            Self::StrictIdZero => strict(broken::Strictness::IdZero),
            Self::StrictQueueDot => strict(broken::Strictness::QueueDot),
            Self::StrictMsInt32 => strict(broken::Strictness::MsInt32),
            Self::StrictAttemptsZero => strict(broken::Strictness::AttemptsZero),
            Self::StrictLimitZero => strict(broken::Strictness::LimitZero),
            Self::FenceAsEngine => Box::new(broken::FenceAsEngine(reference())),
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
            Self::PythonRetryOnError => python_double("--retry-on-error"),
            Self::AddsGrace => Box::new(time::Skewed::new(reference(), time::TimeSkew::AddsGrace)),
            Self::RoundsUpToSeconds => Box::new(time::Skewed::new(
                reference(),
                time::TimeSkew::RoundsUpToSeconds,
            )),
            Self::BackoffInSeconds => Box::new(time::Skewed::new(
                reference(),
                time::TimeSkew::BackoffInSeconds,
            )),
            Self::SubtractsMargin => Box::new(time::Skewed::new(
                reference(),
                time::TimeSkew::SubtractsMargin,
            )),
            Self::SeedNodeOnly => Box::new(cluster::SeedNodeOnly(reference())),
            Self::ClusterAnyDatabase => Box::new(cluster::ClusterAnyDatabase(reference())),
            Self::LoadOnSeedOnly => quirked(|q| q.load_on_seed = true),
            Self::UngroupedBatch => quirked(|q| q.ungrouped_batches = true),
            Self::NoRedirects => quirked(|q| q.no_redirects = true),
            Self::SilentReconnect => quirked(|q| q.silent_reconnect = true),
            Self::PythonSilentReconnect => python_double("--silent-reconnect"),
            Self::ResendClusterPipeline => quirked(|q| q.resend_pipelines = true),
            Self::PythonClusterRetry => python_double("--cluster-retry"),
            Self::IgnoresAsk => quirked(|q| q.ask = Ask::Ignore),
            Self::AskWithoutAsking => quirked(|q| q.ask = Ask::WithoutAsking),
            Self::LoadsWhereSlotMapSays => quirked(|q| q.load_by_slot = true),
            Self::TryagainAsNothing => Box::new(cluster::TryagainAsNothing(reference())),
            Self::SilentNodeReconnect => quirked(|q| q.silent_node_reconnect = true),
            Self::PythonSilentNodeReconnect => python_double("--silent-node-reconnect"),
            Self::GivesUpAfterError => Box::new(cluster::GivesUpAfterError::new(reference())),
            Self::ResendEnqueueAfterReset => {
                Box::new(cluster::ResendEnqueueAfterReset::new(reference()))
            }
            Self::ReadonlyFinal => quirked(|q| q.readonly_final = true),
            Self::StaleSlotMapAfterDeath => quirked(|q| q.stale_slot_map = true),
        }
    }

    /// A factory of this double.
    #[cfg(feature = "doubles")]
    pub fn factory(self, bundle: &Arc<Bundle>) -> Box<dyn ConnectorFactory> {
        if let (Self::PythonRetryOnError, Some(f)) = (self, python_flag_factory("--retry-on-error"))
        {
            return Box::new(f);
        }
        if let (Self::PythonSilentReconnect, Some(f)) =
            (self, python_flag_factory("--silent-reconnect"))
        {
            return Box::new(f);
        }
        if let (Self::PythonClusterRetry, Some(f)) = (self, python_flag_factory("--cluster-retry"))
        {
            return Box::new(f);
        }
        if let (Self::PythonSilentNodeReconnect, Some(f)) =
            (self, python_flag_factory("--silent-node-reconnect"))
        {
            return Box::new(f);
        }
        let bundle = bundle.clone();
        Box::new(move || -> Result<Box<dyn Connector + Send>, HarnessError> {
            Ok(self.make(&bundle))
        })
    }
}

/// One connector of [`python_flag_factory`], or one that says why there is none.
#[cfg(feature = "doubles")]
fn python_double(flag: &str) -> Box<dyn Connector + Send> {
    match python_flag_factory(flag) {
        Some(f) => f
            .make()
            .unwrap_or_else(|e| Box::new(faults::Unavailable(e.to_string()))),
        None => Box::new(faults::Unavailable(
            "no Python connector (set EMQ_PYTHON_CONNECTOR)".into(),
        )),
    }
}

/// The Python connector with a broken-on-purpose `flag`, when it is provisioned, running this
/// repository's `connectors/python` package.
#[cfg(feature = "doubles")]
fn python_flag_factory(flag: &str) -> Option<ChildFactory> {
    let program = faults::python_connector()?;
    // This repository's package first, whichever checkout the venv was installed from.
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../connectors/python");
    Some(ChildFactory::new(
        ChildSpec::new([program.display().to_string(), flag.to_string()])
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
