//! [`CONNECTOR`]: the rules of SPEC §4 (what a connector must do), in SPEC's order, each with the
//! ways to break it.
use super::{How, Rule, RuleId, Way};
use crate::doubles::Double;
use crate::gates::GateId;

/// Every rule of SPEC §4, in SPEC's order.
pub const CONNECTOR: &[Rule] = &[
    Rule {
        id: RuleId::new(4, 1),
        summary: "delay_ms, lease_ms, backoff_ms outside 0..=10^12 are invalid, nothing sent",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-ms-above-max",
            "invalid-enqueue-delay",
            "claim-lease-max-accepted",
            "enqueue-delay-max-accepted",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "an out-of-range delay_ms, lease_ms or backoff_ms sent to the engine",
                &[Double::LenientMs],
            ),
            Way::by(
                How::Refused,
                "milliseconds above 2 147 483 647 refused (an int32 field, Go's or Java's int)",
                &[Double::StrictMsInt32],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 2),
        summary: "attempts outside 0..=2147483647 is invalid, nothing sent",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-int-above-i32-max",
            "invalid-complete-args",
            "complete-pending-false",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "an out-of-range attempts sent to the engine",
                &[Double::LenientAttempts],
            ),
            Way::by(
                How::Refused,
                "attempts 0 refused (a token taken to start at 1)",
                &[Double::StrictAttemptsZero],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 3),
        summary: "max_attempts outside 1..=2147483647 is invalid, nothing sent",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &["invalid-retry-args", "invalid-reap-args"],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "an out-of-range max_attempts sent to the engine",
                &[Double::LenientMaxAttempts],
            ),
            Way::not(
                How::Refused,
                "a valid max_attempts refused",
                "the edges are 1 and the int32 maximum, which is every runtime's natural integer; no check a connector plausibly adds refuses a value between them",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 4),
        summary: "limit and offset outside 0..=2147483647 are invalid, nothing sent",
        checks: &[
            super::protocol::INVALID_SENDS_NOTHING,
            "G6: promote-reap-limit-past-hundred: a limit of 1 000 moves 1 000 of 1 001 due jobs",
        ],
        cases: &[
            "invalid-browse-args",
            "invalid-promote-args",
            "invalid-int-above-i32-max",
            "browse-limit-zero",
            "promote-limit-zero",
            "reap-limit-zero",
            "promote-reap-limit-past-hundred",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "an out-of-range limit or offset sent to the engine",
                &[Double::LenientLimitOffset],
            ),
            Way::by(
                How::Refused,
                "limit 0 refused (a limit taken to be at least 1)",
                &[Double::StrictLimitZero],
            ),
            Way::by(
                How::TooFew,
                "a promote or reap limit above 100 cut to 100 (a ceiling of the connector's own, taken without a word)",
                &[Double::PromoteCapsAt100, Double::ReapCapsAt100],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 5),
        summary: "an id that is not exactly j and 16 ASCII digits (the whole string, no newline) is invalid, nothing sent",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-complete-args",
            "invalid-retry-args",
            "invalid-id-newline",
            "accept-job-id-edges",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "a malformed id sent to the engine",
                &[Double::LenientId],
            ),
            Way::by(
                How::Accepted,
                "an id with one trailing newline (`^j[0-9]{16}$`)",
                &[Double::DollarAnchored],
            ),
            Way::by(
                How::Refused,
                "the well-formed id j0000000000000000 refused",
                &[Double::StrictIdZero],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 6),
        summary: "probe n outside 1..=10^6, batch n outside 1..=10^7 or depth outside 1..=10^5 are invalid",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-count-above-max",
            "invalid-batch-args",
            "invalid-pipeline-probe-args",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "an out-of-range n or depth sent to the engine",
                &[Double::LenientCount],
            ),
            Way::not(
                How::Refused,
                "a large n or depth refused (a cap of the connector's own)",
                "no gate can see a cap between the gates' largest (G5's batch of 100 000 at depth 1 000, its probe of 10 000) and SPEC's bounds, and below them G5 fails the cap as a short batch",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 7),
        summary: "an empty probe key or one under emq: is invalid, nothing sent",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-pipeline-probe-emq-key",
            "invalid-pipeline-probe-args",
            "accept-probe-key-looks-reserved",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "an empty or emq: probe key sent to the engine",
                &[Double::LenientProbeKey],
            ),
            Way::by(
                How::Refused,
                "a key that only looks reserved refused (EMQ:x, emqx)",
                &[Double::StrictProbeKey],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 8),
        summary: "a verb on an unknown session is invalid, nothing sent",
        checks: &[super::protocol::INVALID_SENDS_NOTHING],
        cases: &["session-unknown-invalid", "session-disconnect-then-invalid"],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "a verb on an unknown session run on some connected session",
                &[Double::FallbackSession],
            ),
            Way::by(
                How::Accepted,
                "a verb on a disconnected session run on its old connection",
                &[Double::ZombieSession],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 9),
        summary: "EVALSHA first; one SCRIPT LOAD per NOSCRIPT miss; never EVAL; no error after SCRIPT FLUSH",
        checks: &[
            "G3: commandstats: EVALSHA per transition, loads per flush",
            "G3: after the second flush every NOSCRIPT reply's text is rewritten by the fault proxy (the code kept): still one load per script, no caller error",
            "G3: an engine error reply (WRONGTYPE) of each transition costs one EVALSHA and no SCRIPT LOAD",
        ],
        cases: &[],
        gates: &[GateId::G3],
        ways: &[
            Way::by(
                How::TooMany,
                "SCRIPT LOAD before every call",
                &[Double::LoadEveryCall],
            ),
            Way::by(
                How::TooMany,
                "any engine error taken for NOSCRIPT: a load and a second run of the call",
                &[Double::ReloadOnAnyError],
            ),
            Way::by(
                How::TooMany,
                "more matched than the NOSCRIPT prefix (one engine's whole text, Valkey's `No matching script.`): a miss in other words is the caller's error",
                &[Double::NoscriptExactText],
            ),
            Way::by(
                How::Never,
                "a NOSCRIPT never answered by a load (scripts loaded once at connect): the caller sees the error after a flush",
                &[Double::PreloadOnly],
            ),
            Way::by(
                How::Otherwise,
                "EVAL with the source on a miss (redigo's Script.Do)",
                &[Double::EvalOnNoscript],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 10),
        summary: "only the bundle's SHAs reach the engine",
        checks: &["G2: the script cache holds only bundle SHAs"],
        cases: &[],
        gates: &[GateId::G2],
        ways: &[
            Way::by(
                How::Otherwise,
                "scripts of other bytes: SHAs not the bundle's reach the engine",
                &[Double::ForeignScripts],
            ),
            Way::not(
                How::TooMany,
                "a script of the connector's own loaded beside the bundle's",
                "its SHA is not the bundle's, and G2's cache check asks nothing else of a SHA, so it fails as ForeignScripts does; no connector seen brings its own script",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 11),
        summary: "pipeline_probe writes all n INCR key (INCR itself, not INCRBY) before reading a reply, replies 1..=n in order",
        checks: &[
            "G5: replies 1..=10000 in order, the key holds 10000",
            "G5: with replies withheld by the proxy (on a cluster, the key's node's), all 10000 INCR arrive; other commands that arrived are named",
        ],
        cases: &["pipeline-probe-in-order", "pipeline-probe-hundred"],
        gates: &[GateId::G5],
        ways: &[
            Way::by(
                How::TooFew,
                "one INCR per round trip: no pipeline",
                &[Double::Unpipelined],
            ),
            Way::by(
                How::TooFew,
                "pipelines of at most 1 000, one after another (a client library's chunk): a probe of 10 000 is ten pipelines",
                &[Double::ProbeSplitsAt1000],
            ),
            Way::by(
                How::Otherwise,
                "INCRBY key 1 instead of INCR key (redis-py's incr())",
                &[Double::IncrByProbe],
            ),
            Way::not(
                How::TooMany,
                "more INCR than n",
                "a loop of n sends n, and no client library adds a command to a pipeline; the key's count after G5's probe would show one",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 12),
        summary: "batch writes each pipeline of depth EVALSHA enqueues before reading its replies, and lands whole",
        checks: &[
            "G5: reply, pending_size, seq and first/last ids agree with n",
            "G5: each batch begins on an empty script cache, so its first pipeline meets NOSCRIPT and lands whole only when those enqueues are sent again",
            "G5: with replies withheld by the proxy (on a cluster, the queue's node's), a whole pipeline of 1000 arrives, and not one enqueue more",
        ],
        cases: &[
            "batch-returns-n",
            "batch-large",
            "batch-over-queues",
            "invalid-batch-queues",
            "accept-batch-sixty-four-queues",
        ],
        gates: &[GateId::G5],
        ways: &[
            Way::by(
                How::TooFew,
                "one enqueue fewer than n, the count asked reported",
                &[Double::ShortBatch],
            ),
            Way::by(
                How::TooFew,
                "one enqueue per round trip: no pipeline",
                &[Double::Unpipelined],
            ),
            Way::by(
                How::TooFew,
                "pipelines shallower than depth (half of it)",
                &[Double::ShallowBatch],
            ),
            Way::by(
                How::TooMany,
                "pipelines deeper than depth (twice it)",
                &[Double::DeepBatch],
            ),
            Way::by(
                How::Never,
                "enqueues that answered NOSCRIPT never sent again, counted as landed (Debian's eredis 1.2)",
                &[Double::NoscriptLandsInBatch],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 13),
        summary: "a connector's commands on EchoMQ keys are bundle EVALSHA, the two reads, the fence and the probe INCR only (R4.19 lists every command it may send)",
        checks: &["G8: every MONITOR'd command from the connector"],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "a transition done with raw commands (HGET, ZREM, DEL) instead of its script",
                &[Double::RawComplete],
            ),
            Way::by(
                How::Otherwise,
                "HSET on emq:fence (an install outside HSETNX)",
                &[Double::FenceHset],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 19),
        summary: "a connector authenticates as the url's user and sends only the commands SPEC lists, as a managed Valkey's least-privilege user allows",
        checks: &[
            "G1: after the gate, the ACL LOG of every node (read, then reset, by the harness's admin user) names no command refused to a connector's user and no AUTH failed but the harness's own; one FAIL line each, with the command and the user",
            "G1-G8: the same after every gate, on every engine the harness boots (its connector user holds exactly SPEC's list; default is off)",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::TooMany,
                "a command outside the list on the session's own connection (INFO after connect, a library's version probe)",
                &[Double::InfoAtConnect],
            ),
            Way::by(
                How::Otherwise,
                "the url's user ignored: AUTH with the password alone, as the default user, which is off",
                &[Double::AuthWithoutUser],
            ),
            Way::not(
                How::Never,
                "no AUTH at all",
                "the engine answers NOAUTH to its first command, so every connect fails with kind engine and every gate FAILs at connect, as AuthWithoutUser shows; a double of its own would repeat it",
            ),
            Way::not(
                How::Otherwise,
                "a command only the scripts may call (ZADD, DEL) sent directly",
                "the connector's user must hold what the scripts call inside (the engine checks a script's commands against its caller), so no ACL refuses it; R4.13's MONITOR check in G8 does (RawComplete)",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 14),
        summary: "no job is lost, duplicated or orphaned, even when connections or the process are killed",
        checks: &[
            "G6: keyspace and seq",
            "G7: the model's accounting",
            "G8: accounting after kills",
        ],
        cases: &["enqueue-ids-increment", "mint-batch-then-enqueue"],
        gates: &[GateId::G6, GateId::G7],
        ways: &[
            Way::by(
                How::Twice,
                "an enqueue sent twice, one id reported: a job nobody knows",
                &[Double::EnqueueTwice],
            ),
            Way::not(
                How::TooFew,
                "a job lost",
                "a connector loses a job only by acknowledging a call it did not make (R4.16: AckUnsent) or a batch short of n (R4.12: ShortBatch), each judged under its own rule",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 16),
        summary: "after a lost reply: the call shows as kind engine, never as a success or a made-up reply",
        checks: &[
            "G8: the fault phase's accounting of indeterminate calls through the proxy (on a cluster, the proxy of every node: R8.4)",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "success answered for a call whose connection failed: closed before its reply (G8's lost reply, dropped before forwarding) or its reply cut in the middle of a reply",
                &[Double::AckUnsent],
            ),
            Way::by(
                How::Otherwise,
                "a made-up nothing-to-do answered (claim null, an invented id) for a call whose connection closed or whose reply was cut in the middle of a reply",
                &[Double::SwallowConnectionErrors],
            ),
            Way::not(
                How::Otherwise,
                "a success or a made-up reply for a call whose connection was reset (RST)",
                "to the connector a reset and a close are the same failed read, so a connector that answers one answers the other, and the doubles above take both; G8's proxy closes, which every client library reports as a reset would be",
            ),
            Way::not(
                How::Otherwise,
                "a success or a made-up reply for a call that timed out on its read",
                "a call that timed out failed as a closed one did, and a connector that makes up its answer makes up the others' (the doubles above); what follows the timeout is R4.18's, judged by G8's hold",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 17),
        summary: "a script call is never re-sent behind the caller's back unless the first provably did not run",
        checks: &["G8: the fault phase's accounting finds the extra job of a re-sent call"],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Twice,
                "a script call re-sent after a lost reply (a client library's retry)",
                &[Double::ResendAfterLostReply, Double::PythonRetryOnError],
            ),
            Way::not(
                How::Twice,
                "a batch's pipeline re-sent whole after a failed read",
                "on one engine it is the same re-send as above, caught by the same accounting; on a cluster ResendClusterPipeline takes it (R8.4)",
            ),
            Way::not(
                How::Twice,
                "an enqueue re-sent after its connection was reset or refused when its node was killed",
                "on one engine a reset is a lost reply, the first way's; on a cluster it is R8.10's way, judged by G8's unclean failover (ResendEnqueueAfterReset)",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 18),
        summary: "after a timed-out call a late reply is never read as a later command's (however the connector ensures it)",
        checks: &[
            "G8: a reply held 1.5 s by the proxy, then pending_size on the same session answers what the engine holds",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::fixtures(
                How::OnThis,
                "a late reply read as the next command's on the same connection (redis-py with its three guards off)",
                &["late_reader.py"],
            ),
            Way::not(
                How::Otherwise,
                "the timed-out call reported as a success when its late reply comes",
                "the call has already failed with kind engine by then; a success made up for it is R4.16's way (AckUnsent)",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(4, 15),
        summary: "one module owns the raw client and the key schema (a lint)",
        checks: &[
            "clippy.toml and the reference's #[expect]; connectors/python/tests/test_seam.py",
        ],
        cases: &[],
        gates: &[],
        ways: &[Way::not(
            How::Otherwise,
            "the raw client imported in a second module",
            "a property of the connector's source, not of its behaviour: the gate sees only the wire and the engine, so the connector's own lint enforces it",
        )],
        unbreakable: "a property of the connector's source, not of its behaviour: the gate sees only \
                      the wire and the engine, so the connector's own lint enforces it",
    },
];
