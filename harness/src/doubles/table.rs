//! [`TABLE`]: every double, declared once (`doubles!`): its name, what it does wrong (its doc),
//! how it is made, the rule it breaks in words, and the gates that catch it beyond the ones its
//! rules name.
//!
//! Which gates must FAIL a double is declared once: the rule catalogue
//! (`crate::gates::rules::CATALOGUE`) names, for each SPEC rule, the doubles that break it and
//! the gates that enforce it; a double's entry here adds only the gates that fail it for another
//! reason ([`Entry::also`], with [`Entry::why_also`]). `crate::gates::rules::gates_failing` puts
//! the two together; G6 among them means the double fails some cases (the exact list is
//! `tests/case_doubles/<name>.txt`), G7 that G7's histories catch it. A double of a §8 rule is
//! judged on `--engine cluster` and passes every gate on a single engine (it is the reference
//! there).
//!
//! An entry, in the order the self-tests run them (`Double::all`), one row a double after its
//! doc (what it does wrong), with the gates beyond its rules' on the lines after:
//! - `Name = |b| make`: an expression building it from `b`, a `build::Build` (the bundle, the
//!   reference, `wrap`, `quirked`, `rewrite`, `lenient`, `strict`, `skewed`); or
//!   `Name = python "--flag"`: the Python connector with that broken-on-purpose flag
//!   (`Double::python_flag`, and `Double::factory` runs it);
//! - `, on tls_cluster`: judged on a TLS cluster only (`Double::on_tls_cluster`);
//! - `, breaks "..."`: [`Entry::breaks`]; `also [G..]`: [`Entry::also`]; `why "..."`:
//!   [`Entry::why_also`] (empty without one).
//!
//! The names and the table compile always; `make` only with the feature `doubles`.

#[cfg(feature = "doubles")]
use super::{acl, broken, broken::Check, broken::Strictness, cluster, faults, tls, wire};
#[cfg(feature = "doubles")]
use super::{rewrite::Rewrite, time::TimeSkew};
#[cfg(feature = "doubles")]
use crate::connector::reference::{Ask, Reference};
use crate::protocol::gate::GateId;

/// A double, what it breaks, and where the gate catches it beyond its rules' gates.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub double: Double,
    /// The SPEC rule it breaks, in words.
    pub breaks: &'static str,
    /// Gates that must FAIL it besides the ones its rules name (every other gate must PASS it).
    pub also: &'static [GateId],
    /// Why a gate beyond the obvious one fails too, when it does.
    pub why_also: &'static str,
}

doubles! {
    /// Connects without reading (or installing) the fence.
    SkipFence = |b| b.wrap(wire::SkipFence), breaks "SPEC §3: every connect reads the fence first",
        also [G8],
        why "G8: no connection it opens through the kills reads the fence either (R3.5)";
    /// Sends scripts whose bytes differ from the bundle's (a trailing comment).
    ForeignScripts = |b| Box::new(Reference::new(&wire::patched(b.bundle))), breaks "SPEC §4: bundle SHAs only",
        why "G8: only the bundle's scripts may change EchoMQ keys, and these are not the bundle's";
    /// `SCRIPT LOAD` before every call.
    LoadEveryCall = |b| b.wrap(wire::LoadEveryCall), breaks "SPEC §4: EVALSHA first, one SCRIPT LOAD per miss";
    /// Takes any engine error of a script call for `NOSCRIPT`: `SCRIPT LOAD` and the call again.
    ReloadOnAnyError = |b| b.wrap(wire::ReloadOnAnyError), breaks "R4.9: only a NOSCRIPT reply (its prefix) is a miss; an engine error costs no load and no second run";
    /// Takes a `NOSCRIPT` reply for a miss only when its whole text is Valkey's
    /// (`NOSCRIPT No matching script.`, Valkey's `shared.noscripterr`); Redis 7.0's and 8.0's
    /// (`... Please use EVAL.`) or any other wording is the call's error.
    NoscriptExactText = |b| b.quirked(|q| q.noscript_exact_text = true), breaks "R4.9: a NOSCRIPT reply is known by its prefix only, whatever text follows the code";
    /// Answers `NOSCRIPT` with `EVAL` of the script's source, as redigo's `Script.Do` does.
    EvalOnNoscript = |b| b.quirked(|q| q.eval_on_noscript = true), breaks "R4.9: a miss is answered by SCRIPT LOAD and EVALSHA again, never EVAL (redigo's Script.Do)",
        also [G1, G2, G4, G8],
        why "EVAL is not on R4.19's list: the engine refuses it to the connector's user, so the script never runs and is never cached, and each gate whose first call meets NOSCRIPT fails on it and on the ACL LOG";
    /// Loads the six scripts once, at connect, and reports a later `NOSCRIPT` as the call's error.
    PreloadOnly = |b| b.quirked(|q| q.preload_only = true), breaks "R4.9: after a SCRIPT FLUSH each script costs one load again and the caller sees no error (scripts loaded only at connect)",
        also [G5],
        why "G5: each batch begins on an empty script cache, so its first pipeline meets NOSCRIPT, which this double reports";
    /// Builds the job root without the hash tag (`emq:q:job:`).
    UntaggedRoot = |b| b.wrap(|r| r.with_root(wire::untagged_root)), breaks "SPEC §2: every key a script touches is a KEY or under the tagged ARGV[1] root",
        also [G6],
        why "G8: the untagged hashes are keys outside the grammar, so the accounting finds members without their hash";
    /// `batch` sends one enqueue fewer than asked and reports the count asked.
    ShortBatch = |b| b.rewrite(Rewrite::ShortBatch), breaks "SPEC §4: a pipelined batch lands whole",
        also [G6, G8],
        why "G8: a batch acknowledged with n made n - 1 jobs carrying its token, a lost job";
    /// `batch` writes pipelines twice as deep as asked (everything lands; the depth is broken).
    DeepBatch = |b| b.rewrite(Rewrite::DeepBatch), breaks "R4.12: each pipeline of a batch is depth commands, no more (a deeper one passes every count)";
    /// `batch` writes pipelines half as deep as asked (everything lands; the depth is broken).
    ShallowBatch = |b| b.rewrite(Rewrite::ShallowBatch), breaks "R4.12: each pipeline of a batch is depth commands, no fewer (a shallower one passes every count)";
    /// `complete` as raw `HGET`/`ZSCORE`/`ZREM`/`DEL` instead of the script.
    RawComplete = |b| b.wrap(wire::RawComplete), breaks "SPEC §4: every transition is EVALSHA of a bundle script (command discipline)",
        also [G3],
        why "G3: a complete that is not an EVALSHA leaves fewer EVALSHA than transitions";
    /// `retry` never buries: it sends `max_attempts = i32::MAX`.
    RetryIgnoresMaxAttempts = |b| b.rewrite(Rewrite::RetryIgnoresMaxAttempts), breaks "SPEC §2: retry buries a job at max_attempts";
    /// `reap` moves every expired lease: it sends `limit = 1_000_000`.
    ReapIgnoresLimit = |b| b.rewrite(Rewrite::ReapIgnoresLimit), breaks "SPEC §2: reap moves at most `limit` jobs";
    /// `complete` ignores the caller's token: it sends the latest attempts it saw claimed.
    CompleteIgnoresToken = |b| b.rewrite(Rewrite::CompleteIgnoresToken), breaks "SPEC §1: a stale fencing token changes nothing";
    /// `enqueue` sent twice, the first id reported: a job nobody knows about.
    EnqueueTwice = |b| b.rewrite(Rewrite::EnqueueTwice), breaks "SPEC §4: no job duplicated",
        also [G8];
    /// `pipeline_probe` and `batch` one command per round trip (right replies, no pipelining).
    Unpipelined = |b| b.wrap(broken::Unpipelined), breaks "R4.11, R4.12: the probe and the batch are pipelined (many commands per write)";
    /// `pipeline_probe` pipelines `INCRBY key 1` (redis-py's `incr()`): right replies, not `INCR`.
    IncrByProbe = |b| b.quirked(|q| q.incrby_probe = true), breaks "R4.11: the probe is n INCR key, not INCRBY key 1 (redis-py's incr())",
        also [G8],
        why "INCRBY is not on R4.19's list: G8's probe is refused to the connector's user, and the ACL LOG read after the gate names it";
    /// `batch` counts an enqueue that answered `NOSCRIPT` as landed and never sends it again
    /// (Debian's eredis 1.2 reads a split error reply as a value).
    NoscriptLandsInBatch = |b| b.quirked(|q| q.noscript_lands = true), breaks "R4.12: in a batch, the enqueues that answered NOSCRIPT are sent again after one load; the batch lands whole";
    /// `disconnect` forgets the session but leaves its connection open.
    LeakOnDisconnect = |b| b.quirked(|q| q.leak_on_disconnect = true), breaks "R5.13: disconnect closes the session's connections, not only forgets the session";
    /// `connect` of a connected session leaves the old connection open.
    LeakOnReconnect = |b| b.quirked(|q| q.leak_on_reconnect = true), breaks "R5.13: connect of a connected session closes the old connections";
    /// A 2.5 s read timeout; a call that times out leaves its connection open, abandoned, and the
    /// session goes on over a new one.
    AbandonOnTimeout = |b| b.quirked(|q| q.abandon_on_timeout = true), breaks "R5.13: a connection given up on after a timeout is closed, not abandoned open beside the new one";
    /// On `rediss://`, verifies no certificate (redis-rs's `#insecure`).
    TrustAnyCertificate = |b| b.quirked(|q| q.tls_accept_any = true), breaks "R10.3, R10.4: a rediss:// session verifies the server's certificate, chain and name";
    /// On `rediss://`, verifies the chain and not the name (redis-rs's
    /// `set_danger_accept_invalid_hostnames`).
    NameUnchecked = |b| b.quirked(|q| q.tls_skip_names = true), breaks "R10.4: the certificate must name the host the connection was opened to";
    /// On a `rediss://` cluster, verifies the seed's certificate and no other node's (the TLS
    /// options given to the seed only).
    TrustOnSeedOnly = |b| b.quirked(|q| q.tls_seed_only = true), on tls_cluster, breaks "R10.3, R10.4: every node a cluster session reaches is verified, not the seed only";
    /// On a cluster, reads the slot map from `CLUSTER SHARDS` and dials each node's `ip` for its
    /// pipelines, not its `endpoint` (redis-cluster-client 0.16, #515).
    ShardsIpOnly = |b| b.quirked(|q| q.shards_ip = true), on tls_cluster, breaks "R10.4: a node is dialled by the host name the slot map gives (CLUSTER SHARDS' endpoint), never by its ip",
        also [G2, G3, G4, G5, G8],
        why "every gate whose workload pipelines (a batch, a browse, the probe) to a node off the seed dials it by address, and that handshake fails: no certificate names an address";
    /// Takes a `rediss://` url as `redis://`: plaintext to a TLS server.
    PlaintextOnRediss = |b| b.wrap(tls::PlaintextOnRediss), breaks "R10.2: a rediss:// session speaks TLS from its first byte",
        also [G2, G3, G4, G5, G8],
        why "every gate connects through the TLS front, which closes a plaintext connection: no verb of any gate can run";
    /// Does not read `ca_file` before connecting: one that cannot be read falls back to the
    /// system's trust store, and the connect fails with kind `engine`, not `invalid`.
    CaFileUnchecked = |b| b.wrap(tls::CaFileUnchecked), breaks "R10.1: a ca_file that cannot be read is invalid, nothing sent";
    /// `disconnect` answers `{}` but the session keeps working.
    ZombieSession = |b| b.wrap(|inner| broken::ZombieSession { inner, connected: Default::default() }), breaks "R5.10: after disconnect the session is unknown",
        also [G1],
        why "G1: the session it keeps keeps its connection, which disconnect must close (R5.13)";
    /// Engine errors reported as kind `internal`.
    EngineAsInternal = |b| b.wrap(broken::EngineAsInternal), breaks "R5.4: an engine error is kind engine";
    /// Sends `INFO server` on the session's connection after each connect (a library's version
    /// probe): a command outside SPEC R4.19's list, refused to the connector's user.
    InfoAtConnect = |b| b.wrap(acl::InfoAtConnect), breaks "R4.19: only the commands SPEC lists (INFO is not one)",
        also [G2, G3, G4, G5, G8],
        why "every gate connects, each connect sends INFO, and the ACL LOG is read after every gate";
    /// Ignores the url's user: `AUTH <password>` alone, as the `default` user, which is off, so
    /// it cannot connect (R4.19).
    AuthWithoutUser = |b| b.wrap(acl::AuthWithoutUser), breaks "R4.19: a connector authenticates as the url's user (AUTH user password)",
        also [G2, G3, G4, G5, G8],
        why "every gate connects, and the default user is off: no connect succeeds";
    /// Sends a bad queue name to the engine.
    LenientQueue = |b| b.lenient(Check::Queue), breaks "R1.1: a bad queue name is invalid before a byte is sent";
    /// Sends an out-of-range `delay_ms`, `lease_ms` or `backoff_ms` to the engine.
    LenientMs = |b| b.lenient(Check::Ms), breaks "R4.1: delay_ms, lease_ms, backoff_ms in 0..=10^12";
    /// Sends an out-of-range `attempts` to the engine.
    LenientAttempts = |b| b.lenient(Check::Attempts), breaks "R4.2: attempts in 0..=2147483647";
    /// Sends an out-of-range `max_attempts` to the engine.
    LenientMaxAttempts = |b| b.lenient(Check::MaxAttempts), breaks "R4.3: max_attempts in 1..=2147483647";
    /// Sends an out-of-range `limit` or `offset` to the engine.
    LenientLimitOffset = |b| b.lenient(Check::LimitOffset), breaks "R4.4: limit and offset in 0..=2147483647";
    /// Sends a malformed job id to the engine.
    LenientId = |b| b.lenient(Check::Id), breaks "R4.5: ids match ^j[0-9]{16}$";
    /// Accepts a queue name or an id with one trailing newline (`^...$` in Python or Ruby).
    DollarAnchored = |b| b.wrap(broken::DollarAnchored), breaks "R1.1, R4.5: the whole string is judged; a trailing newline is not part of a valid name or id";
    /// Sends an out-of-range `n` or `depth` to the engine.
    LenientCount = |b| b.lenient(Check::Count), breaks "R4.6: n and depth within their bounds";
    /// Sends an empty or `emq:` probe key to the engine.
    LenientProbeKey = |b| b.lenient(Check::ProbeKey), breaks "R4.7: the probe key is non-empty and outside emq:";
    /// Refuses probe keys that only look reserved (`EMQ:x`, `emqx`): stricter than R4.7.
    StrictProbeKey = |b| b.strict(Strictness::ProbeKey), breaks "R4.7: only emq: (case-sensitive) is reserved; EMQ:x, emqx and emq are valid probe keys";
    /// Refuses session names outside `[A-Za-z0-9_-]{1,64}`: stricter than SPEC R5.10.
    StrictSessionName = |b| b.strict(Strictness::SessionName), breaks "R5.10: a session name is any non-empty string";
    /// Refuses the well-formed id `j0000000000000000`: stricter than R4.5.
    StrictIdZero = |b| b.strict(Strictness::IdZero), breaks "R4.5: an id is j and any 16 digits, j0000000000000000 included";
    /// Refuses queue names with a `.` (a `[\w-]` check): stricter than R1.1.
    StrictQueueDot = |b| b.strict(Strictness::QueueDot), breaks "R1.1: a queue name is any 1 to 128 of [A-Za-z0-9._-], a `.` included";
    /// Refuses milliseconds above the int32 maximum: stricter than R4.1.
    StrictMsInt32 = |b| b.strict(Strictness::MsInt32), breaks "R4.1: milliseconds up to 10^12 are valid, beyond an int32";
    /// Refuses `attempts` 0 (a token taken to start at 1): stricter than R4.2.
    StrictAttemptsZero = |b| b.strict(Strictness::AttemptsZero), breaks "R4.2: attempts 0 is a valid token (a pending job's)";
    /// Refuses `limit` 0: stricter than R4.4.
    StrictLimitZero = |b| b.strict(Strictness::LimitZero), breaks "R4.4: limit 0 is valid and moves or lists nothing";
    /// `browse` in reverse claim order.
    BrowseReversed = |b| b.wrap(broken::BrowseReversed), breaks "R2.5: browse lists ids in claim order";
    /// `browse` returns one id more than `limit` (`ZRANGE key offset offset+limit`).
    BrowseOneMore = |b| b.rewrite(Rewrite::BrowseOneMore), breaks "R2.5: browse lists at most limit ids (ZRANGE offset offset+limit-1)";
    /// `browse` returns at most 1 000 rows, whatever `limit` asks (a library's page).
    BrowseCapsAt1000 = |b| b.rewrite(Rewrite::BrowseCapsAt1000), breaks "R2.5: browse lists limit ids when the queue holds them (a library's page of 1 000 is no limit)";
    /// `promote` moves at most 100, whatever `limit` asks (a ceiling of the connector's own).
    PromoteCapsAt100 = |b| b.rewrite(Rewrite::PromoteCapsAt100), breaks "R4.4: a promote limit in 0..=2 147 483 647 is taken as given (a ceiling of 100 is no limit)";
    /// `reap` moves at most 100, whatever `limit` asks (a ceiling of the connector's own).
    ReapCapsAt100 = |b| b.rewrite(Rewrite::ReapCapsAt100), breaks "R4.4: a reap limit in 0..=2 147 483 647 is taken as given (a ceiling of 100 is no limit)";
    /// `pipeline_probe` in pipelines of at most 1 000, one after another (right replies).
    ProbeSplitsAt1000 = |b| b.rewrite(Rewrite::ProbeSplitsAt1000), breaks "R4.11: a pipeline_probe of 10 000 is one pipeline, not ten of 1 000";
    /// `pending_size` counts the active set too.
    PendingSizeCountsActive = |b| b.wrap(broken::PendingSizeCountsActive), breaks "R2.6: pending_size is ZCARD of the pending set";
    /// Installs an absent fence with one `HSET` outside `MULTI`/`EXEC`.
    FenceHset = |b| b.wrap(|inner| broken::FenceHset::new(inner, &b.bundle.manifest)), breaks "R3.2: an absent fence is installed with HSETNX inside MULTI/EXEC",
        why "G8: HSET on emq:fence is outside the command discipline (only HSETNX installs)";
    /// Refuses a fence of its own protocol with another digest.
    FenceRefusesOtherDigest = |b| b.wrap(|inner| broken::FenceRefusesOtherDigest::new(inner, &b.bundle.manifest)), breaks "R3.3: another digest of the same protocol is a warning, not an error";
    /// Connects through a fence of another protocol.
    FenceIgnoresProtocol = |b| b.wrap(broken::FenceIgnoresProtocol), breaks "R3.4: a fence of another protocol refuses the connect";
    /// A fence of another protocol refuses the connect with kind `engine`, not `fence`.
    FenceAsEngine = |b| b.wrap(broken::FenceAsEngine), breaks "R3.4: a fence of another protocol refuses the connect with kind fence";
    /// Every session shares the first session's connection.
    SharedConnection = |b| b.wrap(|inner| broken::SharedConnection { inner, shared: None }), breaks "R5.7: every session has its own engine connection";
    /// `hello` accepts any protocol.
    HelloAnyProtocol = |b| b.wrap(broken::HelloAnyProtocol), breaks "R5.5: hello of another protocol is unsupported";
    /// A verb on an unknown session runs on some connected session.
    FallbackSession = |b| b.wrap(|inner| broken::FallbackSession { inner, connected: Default::default() }), breaks "R4.8: a verb on an unknown session is invalid";
    /// On an `engine` error, reconnects and re-sends the same script call once.
    ResendAfterLostReply = |b| b.wrap(faults::ResendAfterError::new), breaks "SPEC §4: never re-send a script call unless the first provably did not run",
        also [G3],
        why "G3: it re-sends after an engine error reply too, so a WRONGTYPE costs two EVALSHA";
    /// The Python connector with redis-py's default retry policy on (`--retry-on-error`): it
    /// reconnects and re-sends a command after a dropped connection.
    PythonRetryOnError = python "--retry-on-error", breaks "SPEC §4: never re-send a script call unless the first provably did not run";
    /// Reference quirk: when the engine closed its connection, opens a new one on the next call
    /// and sends the script without reading the fence (a client library's silent reconnect).
    SilentReconnect = |b| b.quirked(|q| q.silent_reconnect = true), breaks "R3.5: a connection the connector opens by itself reads the fence before its first script";
    /// After a failed verb, the next verb on the session dials anew without the fence read.
    RedialUnfenced = |b| b.quirked(|q| q.redial_unfenced = true), breaks "R3.5: the connection a session dials on its next verb after a failed call reads the fence before its first script (redigo's Pool.Get dials one)";
    /// The Python connector with `--silent-reconnect`: redis-py's pool replaces a closed
    /// connection without the fence read.
    PythonSilentReconnect = python "--silent-reconnect", breaks "R3.5: a connection the connector opens by itself reads the fence before its first script";
    /// On an `engine` error, answers success for enqueue, complete and retry.
    AckUnsent = |b| b.wrap(faults::AckUnsent::new), breaks "SPEC §4: a call whose connection failed surfaces kind engine, never a success";
    /// On an `engine` error, answers a made-up "nothing to do" (claim `null`, enqueue a fabricated id).
    SwallowConnectionErrors = |b| b.wrap(faults::SwallowErrors), breaks "SPEC §4: a call whose connection failed surfaces kind engine, never a made-up reply";
    /// Adds 1 500 ms to every non-zero lease, delay and backoff (a "grace period").
    AddsGrace = |b| b.skewed(TimeSkew::AddsGrace), breaks "R1.6: a timed score is the engine's time of the call plus the given ms, exactly";
    /// Rounds leases, delays and backoffs up to whole seconds.
    RoundsUpToSeconds = |b| b.skewed(TimeSkew::RoundsUpToSeconds), breaks "R1.6: a timed score is the engine's time of the call plus the given ms, exactly";
    /// Treats `backoff_ms` below 1 000 as seconds.
    BackoffInSeconds = |b| b.skewed(TimeSkew::BackoffInSeconds), breaks "R1.6: a timed score is the engine's time of the call plus the given ms, exactly";
    /// Takes 250 ms off every lease, delay and backoff above it (a "safety margin").
    SubtractsMargin = |b| b.skewed(TimeSkew::SubtractsMargin), breaks "R1.6: a timed score is the engine's time of the call plus the given ms, exactly (no margin taken off)";
    /// On a cluster, works in database 0 whatever the url names (R8.5).
    ClusterDatabaseDropped = |b| b.wrap(cluster::ClusterDatabaseDropped), breaks "R8.5: on a cluster, the session works in the url's database on every node",
        also [G1, G2, G3, G4, G5],
        why "every gate on a cluster (G6's and G7's self-tests run on one engine): its url names database 9, and a connect that reads the fence in database 0 is refused (NOPERM)";
    /// Ignores `connect`'s `cluster` flag: a plain connection to the seed node only.
    SeedNodeOnly = |b| b.wrap(cluster::SeedNodeOnly), breaks "R8.1: on a cluster, a cluster client that routes every call by slot (on one node: the reference)",
        also [G1, G2, G4, G5, G8],
        why "every gate: the seed does not own the fence's slot, so its connect gets MOVED; and every call on a key of another primary does too";
    /// On a cluster, answers `NOSCRIPT` by loading the script on the seed node only.
    LoadOnSeedOnly = |b| b.quirked(|q| q.load_on_seed = true), breaks "R8.2: NOSCRIPT is answered by SCRIPT LOAD on the node that said it (on one node: the reference)",
        also [G1, G2, G4, G5, G8],
        why "G1, G2, G4, G5, G8: the scripts never reach the other primaries (the seed owns none of the gates' queues), so every script call there fails";
    /// On a cluster, sends a batch over several queues as one pipeline to one node.
    UngroupedBatch = |b| b.quirked(|q| q.ungrouped_batches = true), breaks "R8.3: a batch over queues on several nodes is split by node (on one node: the reference)";
    /// On a cluster, never follows `MOVED`/`ASK` (and never reads the slot map again).
    NoRedirects = |b| b.quirked(|q| q.no_redirects = true), breaks "R8.1, R8.4: MOVED is followed, also after a failover (on one node: the reference)";
    /// On a cluster, sends a node's whole pipeline again on a new connection when its read
    /// failed (redis-py `ClusterPipeline`'s re-send, whatever `retry` says).
    ResendClusterPipeline = |b| b.quirked(|q| q.resend_pipelines = true), breaks "R4.16: a batch whose read failed is never re-sent, on a cluster either (redis-py ClusterPipeline; on one node: the reference)";
    /// The Python connector with `--cluster-retry`: `RedisCluster`'s default retry on a
    /// connection error (`ERRORS_ALLOW_RETRY`, `cluster_error_retry_attempts`) kept.
    PythonClusterRetry = python "--cluster-retry", breaks "R4.16: no retry after a connection error, on a cluster either (redis-py RedisCluster's default retry; on one node: the Python connector)";
    /// On a cluster, follows `MOVED` but reports `ASK` as the call's error (R8.6).
    IgnoresAsk = |b| b.quirked(|q| q.ask = Ask::Ignore), breaks "R8.6: during a slot migration, ASK is answered by ASKING and the call on the named node (on one node: the reference)";
    /// On a cluster, answers `ASK` by sending the call to the named node without `ASKING`
    /// first: the importing node answers `MOVED` back to the source (R8.6).
    AskWithoutAsking = |b| b.quirked(|q| q.ask = Ask::WithoutAsking), breaks "R8.6: the call after ASK is preceded by ASKING on the named node (on one node: the reference)";
    /// On a cluster, follows one redirect per call: a `MOVED` from the node a redirect named is
    /// the call's error (R8.12: a slot that moved since the map was read and is moving again).
    OneRedirect = |b| b.quirked(|q| q.one_redirect = true), breaks "R8.12: a redirect from the node a MOVED named is followed too (a slot that moved since the map was read and is moving again; on one node: the reference)";
    /// Reference quirk on a cluster: a redirect that names no host (`MOVED 12 :7001`, a cluster
    /// at `unknown-endpoint`) is dialled at the empty host, as redis-rs's `ByAddress` route and
    /// redis-py's `AskError` take it (R8.13).
    EmptyHostDialed = |b| b.quirked(|q| q.empty_host_dialed = true), breaks "R8.13: a redirect that names no host goes to the host of the node that answered, never to the empty host";
    /// On a cluster, answers a `NOSCRIPT` that followed a redirect by loading the script where
    /// its slot map says the slot lives, not on the node that said it (R8.2 during a migration).
    LoadsWhereSlotMapSays = |b| b.quirked(|q| q.load_by_slot = true), breaks "R8.8: a NOSCRIPT is answered by SCRIPT LOAD on the node that said it, also when a redirect sent the call there (on one node: the reference)";
    /// On a cluster, answers a claim that met `TRYAGAIN` with "no job" (R8.7).
    TryagainAsNothing = |b| b.wrap(cluster::TryagainAsNothing), breaks "R8.7: TRYAGAIN is never reported as a success or an empty result (on one node: the reference)";
    /// Reference quirk on a cluster: before each script call, a `PING` of the key's node; a
    /// killed connection there is replaced by the cluster client without a fence read.
    SilentNodeReconnect = |b| b.quirked(|q| q.silent_node_reconnect = true), breaks "R8.9: on a cluster, a node connection that replaces a killed one comes after a fence read (redis-py's cluster pool; on one node: the reference)";
    /// The Python connector with `--silent-node-reconnect`: on a cluster, redis-py's node pool
    /// replaces a killed connection and the session sends its script without the fence read.
    PythonSilentNodeReconnect = python "--silent-node-reconnect", breaks "R8.9: on a cluster, a node connection that replaces a killed one comes after a fence read (redis-py's cluster node pool; on one node: the Python connector)";
    /// After its first `engine` error a session answers every later call with kind `engine`
    /// without sending it, until it is connected again: a worker loop that stopped.
    GivesUpAfterError = |b| b.wrap(cluster::GivesUpAfterError::new), breaks "R8.10: across an unclean failover a session keeps working; an error fails one call";
    /// An `enqueue` that failed on a lost connection (reset, refused, closed) is sent once more.
    ResendEnqueueAfterReset = |b| b.wrap(cluster::ResendEnqueueAfterReset::new), breaks "R4.17: an enqueue whose connection was lost is never sent again behind the caller's back";
    /// Reference quirk on a cluster: `READONLY` is final: the slot map stays, and the
    /// connection that said it too.
    ReadonlyFinal = |b| b.quirked(|q| q.readonly_final = true), breaks "R8.11: READONLY makes the slot map stale; the next call reads it again";
    /// Reference quirk on a cluster: a lost connection leaves the slot map (and the dead node's
    /// connection) as it was.
    StaleSlotMapAfterDeath = |b| b.quirked(|q| q.stale_slot_map = true), breaks "R8.11: a lost connection makes the slot map stale; the next call reads it again";
    /// Reference quirk on a cluster: follows `MOVED` for the call and keeps its slot map, so
    /// every later call on the slot meets `MOVED` again.
    MovedNoRefresh = |b| b.quirked(|q| q.moved_no_refresh = true), breaks "R8.11: MOVED makes the slot map stale; the next call reads it again";
    /// Reference quirk on a cluster: a call that follows `MOVED` or `ASK` goes on a connection
    /// of its own, opened without `SELECT` (predis #1696's question).
    SelectNotOnRedirect = |b| b.quirked(|q| q.redirect_without_select = true), breaks "R8.5: a connection opened to follow a redirect selects the url's database";
    /// Reference quirk on a cluster: the url's database reaches the seed's own connections only;
    /// the cluster client's node connections work in database 0.
    SelectSeedOnly = |b| b.quirked(|q| q.select_seed_only = true), breaks "R8.5: every node connection selects the url's database, not the seed's alone",
        also [G1, G2, G3, G4, G5],
        why "every gate on a cluster (G6's and G7's self-tests run on one engine): the fence is read on its node's connection, in database 0, and refused (NOPERM)";
    /// Reference quirk on a cluster: the connections that replace failed ones are opened
    /// without `SELECT` (redis-rs #2146's footgun).
    NoReselectAfterReconnect = |b| b.quirked(|q| q.reconnect_without_select = true), breaks "R8.5: a replacement connection selects the url's database";
    /// Behind Sentinel, asks the first Sentinel only.
    SentinelFirstOnly = |b| b.quirked(|q| q.sentinel.first_only = true), breaks "R11.1: the Sentinels are asked in order; one that refuses is skipped";
    /// Behind Sentinel, waits on a Sentinel as long as on the engine (a minute).
    SentinelNoTimeout = |b| b.quirked(|q| q.sentinel.no_sentinel_timeout = true), breaks "R11.1: a silent Sentinel is given a bounded time, within the request's";
    /// Behind Sentinel, gives a node a Sentinel named 1 s for each reply of its set-up, as the
    /// redis crate does, not a share for the whole check: a silent node costs 4 s, and three
    /// Sentinels naming a stopped primary hold one call 12 s.
    SentinelNamedNoTimeout = |b| b.quirked(|q| q.sentinel.no_named_timeout = true), breaks "R11.1: a silent node a Sentinel named is given a bounded time, within the request's";
    /// Behind Sentinel, uses the node a Sentinel names without asking it `ROLE`.
    SentinelNoRole = |b| b.quirked(|q| q.sentinel.no_role = true), breaks "R11.2: ROLE on every connection to a node a Sentinel named, before anything else";
    /// Behind Sentinel, `READONLY` is the call's error only; the connection stays.
    SentinelReadonlyFinal = |b| b.quirked(|q| q.sentinel.readonly_final = true), breaks "R11.3: READONLY makes the primary stale; the next call finds it afresh";
    /// Behind Sentinel, dials the address found at `connect` again after a loss.
    SentinelStickyAddress = |b| b.quirked(|q| q.sentinel.sticky = true), breaks "R11.3: after a loss the primary is found afresh, never at a remembered address";
    /// Behind Sentinel, asks `SENTINEL MASTERS` first, as redis-py's and redis-rs's Sentinel do.
    SentinelMasters = |b| b.quirked(|q| q.sentinel.masters = true), breaks "R11.4: a Sentinel is asked only what a client asks",
        also [G2, G3, G4, G5, G8],
        why "the Sentinels refuse SENTINEL MASTERS, so no connect finds the primary and every gate fails at connect, its ACL LOG naming the command";
    /// Behind a TLS Sentinel engine, speaks plaintext to the Sentinels (TLS to the data nodes).
    PlaintextToSentinels = |b| b.quirked(|q| q.sentinel.plaintext = true), on tls_sentinel, breaks "R10.2: a rediss:// session's connections to the Sentinels speak TLS too",
        also [G2, G3, G4, G5, G8],
        why "no connect can find the primary: every Sentinel's TLS front closes the plaintext connection, so every gate fails at connect";
}
