//! [`PROTOCOL`]: the rules of SPEC §1–§3 (the grammar, the bundle, the fence), in SPEC's order,
//! each with the ways to break it.
use super::{How, Rule, RuleId, Way};
use crate::doubles::Double;
use crate::gates::GateId;

pub(super) const INVALID_SENDS_NOTHING: &str =
    "G6: the step is `invalid` and the engine received no byte from the case's connections";

/// Every rule of SPEC §1–§3, in SPEC's order.
pub const PROTOCOL: &[Rule] = &[
    Rule {
        id: RuleId::new(1, 1),
        summary: "a queue name outside 1..128 of [A-Za-z0-9._-] is invalid before a byte is sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-enqueue-queue-name",
            "invalid-pending-size-queue",
            "invalid-batch-args",
            "invalid-queue-name-newline",
            "enqueue-queue-name-boundaries",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "a name outside 1..128 of [A-Za-z0-9._-] sent to the engine",
                &[Double::LenientQueue],
            ),
            Way::by(
                How::Accepted,
                "a name with one trailing newline (`^...$` in Python's re, Ruby's line anchors)",
                &[Double::DollarAnchored],
            ),
            Way::by(
                How::Refused,
                "a valid name refused: one with a `.` in it (a `[\\w-]` check)",
                &[Double::StrictQueueDot],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(1, 2),
        summary: "every key of a queue and its job root share the {q} hash tag (one slot)",
        checks: &[
            "G4: every key a script touched is a declared KEY or under the tagged root",
            "G8: every key is in the grammar",
        ],
        cases: &["claim-shape-and-keyspace", "enqueue-delayed-keyspace"],
        gates: &[GateId::G4, GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "the job root without the hash tag (`emq:q:job:`): job hashes in other slots than the queue's keys",
                &[Double::UntaggedRoot],
            ),
            Way::not(
                How::Never,
                "no braces on any key of the queue",
                "every key is then another key than the grammar's, which the first keyspace step of a case and every G7 history read, so no such connector gets past its first case",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(1, 3),
        summary: "job ids are j + the 16-digit counter, minted by the enqueue script, never reused",
        checks: &["G6: mint-* cases", "G7: the model's ids"],
        cases: &["enqueue-first-id", "mint-no-reuse-after-complete"],
        gates: &[],
        ways: &[
            Way::not(
                How::Otherwise,
                "an id minted by the connector (a UUID, a counter of its own)",
                "the enqueue script mints and returns the id; a connector that sends only the bundle's scripts (R2.1, R4.10) has no id of its own to give",
            ),
            Way::not(
                How::Twice,
                "an id reused after its job completed",
                "the counter is INCR'd inside the enqueue script and no bundle script lowers it; only a raw write to seq could, which R4.13 forbids and G8 sees",
            ),
        ],
        unbreakable: "the enqueue script mints the id; a connector that sends only the bundle's \
                      scripts (R2.1, R4.10) cannot mint otherwise, and one that does breaks R2.1",
    },
    Rule {
        id: RuleId::new(1, 4),
        summary: "state names the one set that holds the id; a completed job is deleted",
        checks: &[
            "G6: keyspace assertions",
            "G7: the model's invariants after every step",
        ],
        cases: &["complete-active-true", "retry-delayed-shape"],
        gates: &[],
        ways: &[
            Way::not(
                How::Otherwise,
                "state naming another set than the one that holds the id",
                "only the scripts write state and the sets, each in one atomic call; a connector changes them only by other commands (R4.13) or other scripts (R2.1)",
            ),
            Way::not(
                How::NotClosed,
                "a completed job's hash or set membership left behind",
                "complete deletes both inside the script; a connector leaves one behind only by other commands (R4.13) or other scripts (R2.1)",
            ),
        ],
        unbreakable: "the scripts alone write state and sets; a connector changes them only by \
                      other commands (R4.13) or other scripts (R2.1)",
    },
    Rule {
        id: RuleId::new(1, 5),
        summary: "complete and retry present claim's attempts as the fencing token; a stale one changes nothing",
        checks: &["G6: stale-token cases", "G7: stale tokens in histories"],
        cases: &[
            "complete-wrong-token-false",
            "complete-stale-after-reap-reclaim",
        ],
        gates: &[GateId::G6, GateId::G7],
        ways: &[
            Way::by(
                How::Accepted,
                "a stale token taken as current: complete sends the latest attempts it saw claimed, not the caller's",
                &[Double::CompleteIgnoresToken],
            ),
            Way::not(
                How::Refused,
                "a current token refused (the connector judges tokens itself)",
                "the token is compared inside the script; judging it in the connector needs the job's attempts, which only the raw reads R4.13 forbids would give it",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(1, 6),
        summary: "time is the server's; a timed score is the engine's time of the call plus the given ms, exactly",
        checks: &[
            "G6: $now score matchers within the engine-TIME bracket of the writing step",
            "G7: every active, delayed and dead score within its call's bracket",
        ],
        cases: &[
            "claim-default-lease",
            "enqueue-delayed-keyspace",
            "claim-lease-not-whole-seconds-score",
            "enqueue-delay-not-whole-seconds-score",
            "retry-backoff-below-one-second-score",
        ],
        gates: &[GateId::G6, GateId::G7],
        ways: &[
            Way::by(
                How::TooLate,
                "a grace period added to every lease, delay and backoff",
                &[Double::AddsGrace],
            ),
            Way::by(
                How::TooLate,
                "milliseconds rounded up to whole seconds",
                &[Double::RoundsUpToSeconds],
            ),
            Way::by(
                How::TooLate,
                "a backoff below 1 000 ms read as seconds",
                &[Double::BackoffInSeconds],
            ),
            Way::by(
                How::TooEarly,
                "a safety margin taken off every lease, delay and backoff (the round trip deducted)",
                &[Double::SubtractsMargin],
            ),
            Way::not(
                How::Otherwise,
                "a score from the connector's own clock",
                "the scripts read the engine's TIME themselves; a connector can only change the milliseconds it hands them, the ways above",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(2, 1),
        summary: "a script is its file's bytes exactly; a connector sends only the bundle's bytes",
        checks: &[
            "G2: sha1(file) = manifest = SCRIPT LOAD; only bundle SHAs on the engine",
            "G8: only bundle scripts change EchoMQ keys",
        ],
        cases: &[],
        gates: &[GateId::G2, GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "scripts of other bytes than the files' (a trailing comment, CRLF, a BOM): SHAs not the bundle's",
                &[Double::ForeignScripts],
            ),
            Way::not(
                How::Never,
                "the scripts' sha1s never checked against the manifest at start-up",
                "a connector that skips the check and loads other files sends other SHAs, the way above; the check is how it avoids that, not something the wire shows",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(2, 2),
        summary: "claim is frozen byte for byte (sha1 2319de1e…)",
        checks: &["G2: the bundle's claim file hashes to the frozen sha1"],
        cases: &[],
        gates: &[],
        ways: &[Way::not(
            How::Otherwise,
            "claim's bytes changed",
            "a property of the bundle, not of a connector: G2 checks the file's bytes before any connector runs, and a connector sending other claim bytes breaks R2.1",
        )],
        unbreakable: "a property of the bundle, not of a connector: the bytes are checked in G2 \
                      before any connector runs, and a connector sending other claim bytes breaks \
                      R2.1",
    },
    Rule {
        id: RuleId::new(2, 3),
        summary: "each script gets the caller's arguments unchanged (retry buries at max_attempts; reap moves ≤ limit)",
        checks: &["G6: retry and reap cases", "G7: the model's outcomes"],
        cases: &["retry-dead-at-boundary", "reap-limit"],
        gates: &[GateId::G6, GateId::G7],
        ways: &[
            Way::by(
                How::TooMany,
                "retry never buries: max_attempts sent as 2 147 483 647",
                &[Double::RetryIgnoresMaxAttempts],
            ),
            Way::by(
                How::TooMany,
                "reap moves every expired lease: limit sent as 1 000 000",
                &[Double::ReapIgnoresLimit],
            ),
            Way::not(
                How::TooFew,
                "a limit lowered (a clamp to a maximum of the connector's own)",
                "judged at R4.4, where case promote-reap-limit-past-hundred asks promote and reap for 1 000 of 1 001 due jobs (PromoteCapsAt100, ReapCapsAt100); G7's histories ask for a handful, so the rule's G7 cannot see it",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(2, 4),
        summary: "every key a script touches is one of its KEYS or under its ARGV[1] root",
        checks: &["G4: MONITOR'd script keys against the declared KEYS and root"],
        cases: &[],
        gates: &[GateId::G4],
        ways: &[
            Way::by(
                How::Otherwise,
                "a key outside the KEYS and the tagged root (an untagged job root)",
                &[Double::UntaggedRoot],
            ),
            Way::not(
                How::TooMany,
                "KEYS other than the manifest's, or in another order",
                "the scripts index KEYS by position, so another list makes every transition write other keys, which every case's keyspace step reads; no such connector gets past its first case",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(2, 5),
        summary: "browse is ZRANGE then pipelined HGET payloads, in claim order; vanished ids left out",
        checks: &["G6: browse cases"],
        cases: &[
            "browse-claim-order",
            "browse-offset-limit-window",
            "browse-limit-past-library-pages",
        ],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Otherwise,
                "ids in reverse claim order",
                &[Double::BrowseReversed],
            ),
            Way::by(
                How::TooMany,
                "one id more than limit (`ZRANGE key offset offset+limit`, an off-by-one)",
                &[Double::BrowseOneMore],
            ),
            Way::by(
                How::TooFew,
                "at most 1 000 rows whatever limit asks (a client library's page taken for the whole)",
                &[Double::BrowseCapsAt1000],
            ),
            Way::not(
                How::TooFew,
                "an id whose hash vanished between the two reads kept, or one still there left out",
                "no gate can see it: the window between the ZRANGE and the HGETs is the connector's, and no gate completes a job inside it",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(2, 6),
        summary: "pending_size is ZCARD of the pending set",
        checks: &["G6: pending-size cases", "G5: pending_size after the batch"],
        cases: &["pending-size-enqueue-claim-complete", "pending-size-reap"],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::TooMany,
                "pending_size counts the active set too",
                &[Double::PendingSizeCountsActive],
            ),
            Way::not(
                How::TooFew,
                "pending_size counts part of the pending set (a ZCOUNT over a score range)",
                "every pending score is 0, so a range counts all of the set or none of it, and none is what every pending-size case with a job refutes",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(3, 1),
        summary: "every connect reads the fence before its first script (connect before it answers)",
        checks: &["G1: every connection's first EchoMQ command is the fence read"],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::Never,
                "connect sends scripts without reading the fence",
                &[Double::SkipFence],
            ),
            Way::not(
                How::TooLate,
                "the fence read after the connection's first script",
                "no connector plausibly reads it after it already ran a script: a lazy read is made before the verb that needs it, and SkipFence's MONITOR check sees any script before the read",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(3, 2),
        summary: "an absent fence is installed with one HSETNX per field inside one MULTI/EXEC, then read again",
        checks: &[
            "G1: the install seen on MONITOR",
            "G8: command discipline on emq:fence",
        ],
        cases: &["fence-installed-on-connect"],
        gates: &[GateId::G1, GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "an absent fence installed with one HSET outside MULTI/EXEC",
                &[Double::FenceHset],
            ),
            Way::by(
                How::Never,
                "an absent fence never installed (connect goes on without it)",
                &[Double::SkipFence],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(3, 3),
        summary: "a fence of the connector's protocol connects; another digest is a warning only",
        checks: &["G6: fence cases"],
        cases: &["fence-same-protocol-other-digest", "fence-equal-accepted"],
        gates: &[GateId::G6],
        ways: &[
            Way::by(
                How::Refused,
                "a fence of the connector's own protocol with another digest refused",
                &[Double::FenceRefusesOtherDigest],
            ),
            Way::not(
                How::Otherwise,
                "the other digest overwritten with the connector's own",
                "the only write R4.13 allows on emq:fence is HSETNX, which cannot overwrite a field, and G8 sees any other",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(3, 4),
        summary: "a fence of another protocol refuses the connect: kind fence, both versions named, no script sent",
        checks: &[
            "G1: the refusal, its message, nothing sent after it",
            "G6: fence-*-refused cases",
        ],
        cases: &[
            "fence-other-protocol-refused",
            "fence-older-protocol-refused",
        ],
        gates: &[GateId::G1, GateId::G6],
        ways: &[
            Way::by(
                How::Accepted,
                "a fence of another protocol connected through",
                &[Double::FenceIgnoresProtocol],
            ),
            Way::by(
                How::Otherwise,
                "the refusal given as kind engine, not fence (a generic error raised)",
                &[Double::FenceAsEngine],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(3, 5),
        summary: "a connection the connector opens by itself (a client library's reconnect) reads the fence before its first script",
        checks: &[
            "G8: MONITOR through the crash phase: every connection's first EchoMQ command is the fence read (one engine)",
            "G8: after one failed call in three the next verb goes on the same session, as a caller's would, so a redial the connector makes there is watched too",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Opened,
                "a connection the engine closed replaced silently, the script sent on it unfenced (redis-py's pool, redis-rb's ensure_connected)",
                &[Double::SilentReconnect, Double::PythonSilentReconnect],
            ),
            Way::by(
                How::Opened,
                "after a failed call, the next verb dials a new connection without the fence (redigo's Pool.Get)",
                &[Double::RedialUnfenced],
            ),
        ],
        unbreakable: "",
    },
];
