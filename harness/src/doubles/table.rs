//! [`TABLE`]: every double, the rule it breaks in words, and the gates that catch it beyond the
//! ones its rules name.
//!
//! Which gates must FAIL a double is declared once: the rule catalogue
//! (`crate::gates::rules::CATALOGUE`) names, for each SPEC rule, the doubles that break it and
//! the gates that enforce it; a double's entry here adds only the gates that fail it for another
//! reason ([`Entry::also`], with [`Entry::why_also`]). `crate::gates::rules::gates_failing` puts
//! the two together; G6 among them means the double fails some cases (the exact list is
//! `tests/case_doubles/<name>.txt`), G7 that G7's histories catch it. A double of a §8 rule is
//! judged on `--engine cluster` and passes every gate on a single engine (it is the reference
//! there).

use super::Double;
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

/// Every double, in the order the self-tests run them.
pub const TABLE: &[Entry] = &[
    Entry {
        double: Double::SkipFence,
        breaks: "SPEC §3: every connect reads the fence first",
        also: &[GateId::G8],
        why_also: "G8: no connection it opens through the kills reads the fence either (R3.5)",
    },
    Entry {
        double: Double::ForeignScripts,
        breaks: "SPEC §4: bundle SHAs only",
        also: &[],
        why_also: "G8: only the bundle's scripts may change EchoMQ keys, and these are not the bundle's",
    },
    Entry {
        double: Double::LoadEveryCall,
        breaks: "SPEC §4: EVALSHA first, one SCRIPT LOAD per miss",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ReloadOnAnyError,
        breaks: "R4.9: only a NOSCRIPT reply (its prefix) is a miss; an engine error costs no load and no second run",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::EvalOnNoscript,
        breaks: "R4.9: a miss is answered by SCRIPT LOAD and EVALSHA again, never EVAL (redigo's Script.Do)",
        also: &[GateId::G1, GateId::G2, GateId::G4, GateId::G8],
        why_also: "EVAL is not on R4.19's list: the engine refuses it to the connector's user, so the script never runs and is never cached, and each gate whose first call meets NOSCRIPT fails on it and on the ACL LOG",
    },
    Entry {
        double: Double::PreloadOnly,
        breaks: "R4.9: after a SCRIPT FLUSH each script costs one load again and the caller sees no error (scripts loaded only at connect)",
        also: &[GateId::G5],
        why_also: "G5: each batch begins on an empty script cache, so its first pipeline meets NOSCRIPT, which this double reports",
    },
    Entry {
        double: Double::UntaggedRoot,
        breaks: "SPEC §2: every key a script touches is a KEY or under the tagged ARGV[1] root",
        also: &[GateId::G6],
        why_also: "G8: the untagged hashes are keys outside the grammar, so the accounting finds members without their hash",
    },
    Entry {
        double: Double::ShortBatch,
        breaks: "SPEC §4: a pipelined batch lands whole",
        also: &[GateId::G6, GateId::G8],
        why_also: "G8: a batch acknowledged with n made n - 1 jobs carrying its token, a lost job",
    },
    Entry {
        double: Double::DeepBatch,
        breaks: "R4.12: each pipeline of a batch is depth commands, no more (a deeper one passes every count)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ShallowBatch,
        breaks: "R4.12: each pipeline of a batch is depth commands, no fewer (a shallower one passes every count)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::RawComplete,
        breaks: "SPEC §4: every transition is EVALSHA of a bundle script (command discipline)",
        also: &[GateId::G3],
        why_also: "G3: a complete that is not an EVALSHA leaves fewer EVALSHA than transitions",
    },
    Entry {
        double: Double::RetryIgnoresMaxAttempts,
        breaks: "SPEC §2: retry buries a job at max_attempts",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ReapIgnoresLimit,
        breaks: "SPEC §2: reap moves at most `limit` jobs",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::CompleteIgnoresToken,
        breaks: "SPEC §1: a stale fencing token changes nothing",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::EnqueueTwice,
        breaks: "SPEC §4: no job duplicated",
        also: &[GateId::G8],
        why_also: "",
    },
    Entry {
        double: Double::Unpipelined,
        breaks: "R4.11, R4.12: the probe and the batch are pipelined (many commands per write)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::IncrByProbe,
        breaks: "R4.11: the probe is n INCR key, not INCRBY key 1 (redis-py's incr())",
        also: &[GateId::G8],
        why_also: "INCRBY is not on R4.19's list: G8's probe is refused to the connector's user, and the ACL LOG read after the gate names it",
    },
    Entry {
        double: Double::NoscriptLandsInBatch,
        breaks: "R4.12: in a batch, the enqueues that answered NOSCRIPT are sent again after one load; the batch lands whole",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LeakOnDisconnect,
        breaks: "R5.13: disconnect closes the session's connections, not only forgets the session",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LeakOnReconnect,
        breaks: "R5.13: connect of a connected session closes the old connections",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::AbandonOnTimeout,
        breaks: "R5.13: a connection given up on after a timeout is closed, not abandoned open beside the new one",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::TrustAnyCertificate,
        breaks: "R10.3, R10.4: a rediss:// session verifies the server's certificate, chain and name",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::NameUnchecked,
        breaks: "R10.4: the certificate must name the host the connection was opened to",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::TrustOnSeedOnly,
        breaks: "R10.3, R10.4: every node a cluster session reaches is verified, not the seed only",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::PlaintextOnRediss,
        breaks: "R10.2: a rediss:// session speaks TLS from its first byte",
        also: &[GateId::G2, GateId::G3, GateId::G4, GateId::G5, GateId::G8],
        why_also: "every gate connects through the TLS front, which closes a plaintext connection: no verb of any gate can run",
    },
    Entry {
        double: Double::CaFileUnchecked,
        breaks: "R10.1: a ca_file that cannot be read is invalid, nothing sent",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ZombieSession,
        breaks: "R5.10: after disconnect the session is unknown",
        also: &[GateId::G1],
        why_also: "G1: the session it keeps keeps its connection, which disconnect must close (R5.13)",
    },
    Entry {
        double: Double::EngineAsInternal,
        breaks: "R5.4: an engine error is kind engine",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::InfoAtConnect,
        breaks: "R4.19: only the commands SPEC lists (INFO is not one)",
        also: &[GateId::G2, GateId::G3, GateId::G4, GateId::G5, GateId::G8],
        why_also: "every gate connects, each connect sends INFO, and the ACL LOG is read after every gate",
    },
    Entry {
        double: Double::AuthWithoutUser,
        breaks: "R4.19: a connector authenticates as the url's user (AUTH user password)",
        also: &[GateId::G2, GateId::G3, GateId::G4, GateId::G5, GateId::G8],
        why_also: "every gate connects, and the default user is off: no connect succeeds",
    },
    Entry {
        double: Double::LenientQueue,
        breaks: "R1.1: a bad queue name is invalid before a byte is sent",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LenientMs,
        breaks: "R4.1: delay_ms, lease_ms, backoff_ms in 0..=10^12",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LenientAttempts,
        breaks: "R4.2: attempts in 0..=2147483647",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LenientMaxAttempts,
        breaks: "R4.3: max_attempts in 1..=2147483647",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LenientLimitOffset,
        breaks: "R4.4: limit and offset in 0..=2147483647",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LenientId,
        breaks: "R4.5: ids match ^j[0-9]{16}$",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::DollarAnchored,
        breaks: "R1.1, R4.5: the whole string is judged; a trailing newline is not part of a valid name or id",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LenientCount,
        breaks: "R4.6: n and depth within their bounds",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LenientProbeKey,
        breaks: "R4.7: the probe key is non-empty and outside emq:",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StrictProbeKey,
        breaks: "R4.7: only emq: (case-sensitive) is reserved; EMQ:x, emqx and emq are valid probe keys",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StrictSessionName,
        breaks: "R5.10: a session name is any non-empty string",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StrictIdZero,
        breaks: "R4.5: an id is j and any 16 digits, j0000000000000000 included",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StrictQueueDot,
        breaks: "R1.1: a queue name is any 1 to 128 of [A-Za-z0-9._-], a `.` included",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StrictMsInt32,
        breaks: "R4.1: milliseconds up to 10^12 are valid, beyond an int32",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StrictAttemptsZero,
        breaks: "R4.2: attempts 0 is a valid token (a pending job's)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StrictLimitZero,
        breaks: "R4.4: limit 0 is valid and moves or lists nothing",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::BrowseReversed,
        breaks: "R2.5: browse lists ids in claim order",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::BrowseOneMore,
        breaks: "R2.5: browse lists at most limit ids (ZRANGE offset offset+limit-1)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::BrowseCapsAt1000,
        breaks: "R2.5: browse lists limit ids when the queue holds them (a library's page of 1 000 is no limit)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::PromoteCapsAt100,
        breaks: "R4.4: a promote limit in 0..=2 147 483 647 is taken as given (a ceiling of 100 is no limit)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ReapCapsAt100,
        breaks: "R4.4: a reap limit in 0..=2 147 483 647 is taken as given (a ceiling of 100 is no limit)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ProbeSplitsAt1000,
        breaks: "R4.11: a pipeline_probe of 10 000 is one pipeline, not ten of 1 000",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::PendingSizeCountsActive,
        breaks: "R2.6: pending_size is ZCARD of the pending set",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::FenceHset,
        breaks: "R3.2: an absent fence is installed with HSETNX inside MULTI/EXEC",
        also: &[],
        why_also: "G8: HSET on emq:fence is outside the command discipline (only HSETNX installs)",
    },
    Entry {
        double: Double::FenceRefusesOtherDigest,
        breaks: "R3.3: another digest of the same protocol is a warning, not an error",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::FenceIgnoresProtocol,
        breaks: "R3.4: a fence of another protocol refuses the connect",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::FenceAsEngine,
        breaks: "R3.4: a fence of another protocol refuses the connect with kind fence",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::SharedConnection,
        breaks: "R5.7: every session has its own engine connection",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::HelloAnyProtocol,
        breaks: "R5.5: hello of another protocol is unsupported",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::FallbackSession,
        breaks: "R4.8: a verb on an unknown session is invalid",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ResendAfterLostReply,
        breaks: "SPEC §4: never re-send a script call unless the first provably did not run",
        also: &[GateId::G3],
        why_also: "G3: it re-sends after an engine error reply too, so a WRONGTYPE costs two EVALSHA",
    },
    Entry {
        double: Double::PythonRetryOnError,
        breaks: "SPEC §4: never re-send a script call unless the first provably did not run",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::SilentReconnect,
        breaks: "R3.5: a connection the connector opens by itself reads the fence before its first script",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::RedialUnfenced,
        breaks: "R3.5: the connection a session dials on its next verb after a failed call reads the fence before its first script (redigo's Pool.Get dials one)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::PythonSilentReconnect,
        breaks: "R3.5: a connection the connector opens by itself reads the fence before its first script",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::AckUnsent,
        breaks: "SPEC §4: a call whose connection failed surfaces kind engine, never a success",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::SwallowConnectionErrors,
        breaks: "SPEC §4: a call whose connection failed surfaces kind engine, never a made-up reply",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::AddsGrace,
        breaks: "R1.6: a timed score is the engine's time of the call plus the given ms, exactly",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::RoundsUpToSeconds,
        breaks: "R1.6: a timed score is the engine's time of the call plus the given ms, exactly",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::BackoffInSeconds,
        breaks: "R1.6: a timed score is the engine's time of the call plus the given ms, exactly",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::SubtractsMargin,
        breaks: "R1.6: a timed score is the engine's time of the call plus the given ms, exactly (no margin taken off)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ClusterAnyDatabase,
        breaks: "R8.5: on a cluster, a url naming a database other than 0 is invalid",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::SeedNodeOnly,
        breaks: "R8.1: on a cluster, a cluster client that routes every call by slot (on one node: the reference)",
        also: &[GateId::G1, GateId::G2, GateId::G4, GateId::G5, GateId::G8],
        why_also: "every gate: the seed does not own the fence's slot, so its connect gets MOVED; and every call on a key of another primary does too",
    },
    Entry {
        double: Double::LoadOnSeedOnly,
        breaks: "R8.2: NOSCRIPT is answered by SCRIPT LOAD on the node that said it (on one node: the reference)",
        also: &[GateId::G1, GateId::G2, GateId::G4, GateId::G5, GateId::G8],
        why_also: "G1, G2, G4, G5, G8: the scripts never reach the other primaries (the seed owns none of the gates' queues), so every script call there fails",
    },
    Entry {
        double: Double::UngroupedBatch,
        breaks: "R8.3: a batch over queues on several nodes is split by node (on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::NoRedirects,
        breaks: "R8.1, R8.4: MOVED is followed, also after a failover (on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ResendClusterPipeline,
        breaks: "R4.16: a batch whose read failed is never re-sent, on a cluster either (redis-py ClusterPipeline; on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::PythonClusterRetry,
        breaks: "R4.16: no retry after a connection error, on a cluster either (redis-py RedisCluster's default retry; on one node: the Python connector)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::IgnoresAsk,
        breaks: "R8.6: during a slot migration, ASK is answered by ASKING and the call on the named node (on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::AskWithoutAsking,
        breaks: "R8.6: the call after ASK is preceded by ASKING on the named node (on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::LoadsWhereSlotMapSays,
        breaks: "R8.8: a NOSCRIPT is answered by SCRIPT LOAD on the node that said it, also when a redirect sent the call there (on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::TryagainAsNothing,
        breaks: "R8.7: TRYAGAIN is never reported as a success or an empty result (on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::SilentNodeReconnect,
        breaks: "R8.9: on a cluster, a node connection that replaces a killed one comes after a fence read (redis-py's cluster pool; on one node: the reference)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::PythonSilentNodeReconnect,
        breaks: "R8.9: on a cluster, a node connection that replaces a killed one comes after a fence read (redis-py's cluster node pool; on one node: the Python connector)",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::GivesUpAfterError,
        breaks: "R8.10: across an unclean failover a session keeps working; an error fails one call",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ResendEnqueueAfterReset,
        breaks: "R4.17: an enqueue whose connection was lost is never sent again behind the caller's back",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::ReadonlyFinal,
        breaks: "R8.11: READONLY makes the slot map stale; the next call reads it again",
        also: &[],
        why_also: "",
    },
    Entry {
        double: Double::StaleSlotMapAfterDeath,
        breaks: "R8.11: a lost connection makes the slot map stale; the next call reads it again",
        also: &[],
        why_also: "",
    },
];
