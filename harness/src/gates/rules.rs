//! The rule catalogue: every numbered rule of `bundle/SPEC.md` (**R<section>.<n>**), the gate
//! checks and cases that enforce it, and the deliberately broken connectors ("doubles") that break
//! it and that the named gates must FAIL — or why no connector can break it.
//!
//! `tests/rules.rs` keeps this table and SPEC in step (every id in one is in the other), checks
//! that every named case and double exists, and runs the kill matrix: each double through each
//! gate its rule names, which must FAIL. `emq-gate rules` prints it.

/// One rule of SPEC.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// `R<section>.<n>`, as bold in SPEC.
    pub id: &'static str,
    /// The rule in a line.
    pub summary: &'static str,
    /// The gate checks that enforce it, in words (`G5: ...`).
    pub checks: &'static [&'static str],
    /// Case ids (G6) that enforce it; where G6 is in `gates`, a double must fail one of them.
    pub cases: &'static [&'static str],
    /// The gates that must FAIL each of `doubles`.
    pub gates: &'static [&'static str],
    /// The doubles that break it: an `emq::doubles::Double` name, or `fixture:<file>` for a child
    /// process under `harness/tests/fixtures/`.
    pub doubles: &'static [&'static str],
    /// Empty for a breakable rule; otherwise why no connector can break it.
    pub unbreakable: &'static str,
}

impl Rule {
    /// True for the cluster rules (SPEC §8): their doubles are judged on `--engine cluster`,
    /// and each must also PASS the same gates on a single engine (it breaks only §8).
    pub fn on_cluster(&self) -> bool {
        self.id.starts_with("R8.")
    }

    /// True when some connector can break it (it then needs a double).
    pub fn breakable(&self) -> bool {
        self.unbreakable.is_empty()
    }
}

const INVALID_SENDS_NOTHING: &str =
    "G6: the step is `invalid` and the engine received no byte from the case's connections";

/// Every rule of SPEC, in SPEC's order.
pub const CATALOGUE: &[Rule] = &[
    Rule {
        id: "R1.1",
        summary: "a queue name outside 1..128 of [A-Za-z0-9._-] is invalid before a byte is sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-enqueue-queue-name",
            "invalid-pending-size-queue",
            "invalid-batch-args",
        ],
        gates: &["G6"],
        doubles: &["LenientQueue"],
        unbreakable: "",
    },
    Rule {
        id: "R1.2",
        summary: "every key of a queue and its job root share the {q} hash tag (one slot)",
        checks: &[
            "G4: every key a script touched is a declared KEY or under the tagged root",
            "G8: every key is in the grammar",
        ],
        cases: &["claim-shape-and-keyspace", "enqueue-delayed-keyspace"],
        gates: &["G4", "G8"],
        doubles: &["UntaggedRoot"],
        unbreakable: "",
    },
    Rule {
        id: "R1.3",
        summary: "job ids are j + the 16-digit counter, minted by the enqueue script, never reused",
        checks: &["G6: mint-* cases", "G7: the model's ids"],
        cases: &["enqueue-first-id", "mint-no-reuse-after-complete"],
        gates: &[],
        doubles: &[],
        unbreakable: "the enqueue script mints the id; a connector that sends only the bundle's \
                      scripts (R2.1, R4.10) cannot mint otherwise, and one that does breaks R2.1",
    },
    Rule {
        id: "R1.4",
        summary: "state names the one set that holds the id; a completed job is deleted",
        checks: &[
            "G6: keyspace assertions",
            "G7: the model's invariants after every step",
        ],
        cases: &["complete-active-true", "retry-delayed-shape"],
        gates: &[],
        doubles: &[],
        unbreakable: "the scripts alone write state and sets; a connector changes them only by \
                      other commands (R4.13) or other scripts (R2.1)",
    },
    Rule {
        id: "R1.5",
        summary: "complete and retry present claim's attempts as the fencing token; a stale one changes nothing",
        checks: &["G6: stale-token cases", "G7: stale tokens in histories"],
        cases: &[
            "complete-wrong-token-false",
            "complete-stale-after-reap-reclaim",
        ],
        gates: &["G6", "G7"],
        doubles: &["CompleteIgnoresToken"],
        unbreakable: "",
    },
    Rule {
        id: "R1.6",
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
        gates: &["G6", "G7"],
        doubles: &["AddsGrace", "RoundsUpToSeconds", "BackoffInSeconds"],
        unbreakable: "",
    },
    Rule {
        id: "R2.1",
        summary: "a script is its file's bytes exactly; a connector sends only the bundle's bytes",
        checks: &[
            "G2: sha1(file) = manifest = SCRIPT LOAD; only bundle SHAs on the engine",
            "G8: only bundle scripts change EchoMQ keys",
        ],
        cases: &[],
        gates: &["G2", "G8"],
        doubles: &["ForeignScripts"],
        unbreakable: "",
    },
    Rule {
        id: "R2.2",
        summary: "claim is frozen byte for byte (sha1 2319de1e…)",
        checks: &["G2: the bundle's claim file hashes to the frozen sha1"],
        cases: &[],
        gates: &[],
        doubles: &[],
        unbreakable: "a property of the bundle, not of a connector: the bytes are checked in G2 \
                      before any connector runs, and a connector sending other claim bytes breaks \
                      R2.1",
    },
    Rule {
        id: "R2.3",
        summary: "each script gets the caller's arguments unchanged (retry buries at max_attempts; reap moves ≤ limit)",
        checks: &["G6: retry and reap cases", "G7: the model's outcomes"],
        cases: &["retry-dead-at-boundary", "reap-limit"],
        gates: &["G6", "G7"],
        doubles: &["RetryIgnoresMaxAttempts", "ReapIgnoresLimit"],
        unbreakable: "",
    },
    Rule {
        id: "R2.4",
        summary: "every key a script touches is one of its KEYS or under its ARGV[1] root",
        checks: &["G4: MONITOR'd script keys against the declared KEYS and root"],
        cases: &[],
        gates: &["G4"],
        doubles: &["UntaggedRoot"],
        unbreakable: "",
    },
    Rule {
        id: "R2.5",
        summary: "browse is ZRANGE then pipelined HGET payloads, in claim order; vanished ids left out",
        checks: &["G6: browse cases"],
        cases: &["browse-claim-order", "browse-offset-limit-window"],
        gates: &["G6"],
        doubles: &["BrowseReversed"],
        unbreakable: "",
    },
    Rule {
        id: "R2.6",
        summary: "pending_size is ZCARD of the pending set",
        checks: &["G6: pending-size cases", "G5: pending_size after the batch"],
        cases: &["pending-size-enqueue-claim-complete", "pending-size-reap"],
        gates: &["G6"],
        doubles: &["PendingSizeCountsActive"],
        unbreakable: "",
    },
    Rule {
        id: "R3.1",
        summary: "every connect reads the fence before its first verb",
        checks: &["G1: every connection's first EchoMQ command is the fence read"],
        cases: &[],
        gates: &["G1"],
        doubles: &["SkipFence"],
        unbreakable: "",
    },
    Rule {
        id: "R3.2",
        summary: "an absent fence is installed with one HSETNX per field inside one MULTI/EXEC, then read again",
        checks: &[
            "G1: the install seen on MONITOR",
            "G8: command discipline on emq:fence",
        ],
        cases: &["fence-installed-on-connect"],
        gates: &["G1", "G8"],
        doubles: &["FenceHset"],
        unbreakable: "",
    },
    Rule {
        id: "R3.3",
        summary: "a fence of the connector's protocol connects; another digest is a warning only",
        checks: &["G6: fence cases"],
        cases: &["fence-same-protocol-other-digest", "fence-equal-accepted"],
        gates: &["G6"],
        doubles: &["FenceRefusesOtherDigest"],
        unbreakable: "",
    },
    Rule {
        id: "R3.4",
        summary: "a fence of another protocol refuses the connect: kind fence, both versions named, no script sent",
        checks: &[
            "G1: the refusal, its message, nothing sent after it",
            "G6: fence-*-refused cases",
        ],
        cases: &[
            "fence-other-protocol-refused",
            "fence-older-protocol-refused",
        ],
        gates: &["G1", "G6"],
        doubles: &["FenceIgnoresProtocol"],
        unbreakable: "",
    },
    Rule {
        id: "R4.1",
        summary: "delay_ms, lease_ms, backoff_ms outside 0..=10^12 are invalid, nothing sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &["invalid-ms-above-max", "invalid-enqueue-delay"],
        gates: &["G6"],
        doubles: &["LenientMs"],
        unbreakable: "",
    },
    Rule {
        id: "R4.2",
        summary: "attempts outside 0..=2147483647 is invalid, nothing sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &["invalid-int-above-i32-max", "invalid-complete-args"],
        gates: &["G6"],
        doubles: &["LenientAttempts"],
        unbreakable: "",
    },
    Rule {
        id: "R4.3",
        summary: "max_attempts outside 1..=2147483647 is invalid, nothing sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &["invalid-retry-args", "invalid-reap-args"],
        gates: &["G6"],
        doubles: &["LenientMaxAttempts"],
        unbreakable: "",
    },
    Rule {
        id: "R4.4",
        summary: "limit and offset outside 0..=2147483647 are invalid, nothing sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-browse-args",
            "invalid-promote-args",
            "invalid-int-above-i32-max",
        ],
        gates: &["G6"],
        doubles: &["LenientLimitOffset"],
        unbreakable: "",
    },
    Rule {
        id: "R4.5",
        summary: "an id not matching ^j[0-9]{16}$ is invalid, nothing sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &["invalid-complete-args", "invalid-retry-args"],
        gates: &["G6"],
        doubles: &["LenientId"],
        unbreakable: "",
    },
    Rule {
        id: "R4.6",
        summary: "probe n outside 1..=10^6, batch n outside 1..=10^7 or depth outside 1..=10^5 are invalid",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-count-above-max",
            "invalid-batch-args",
            "invalid-pipeline-probe-args",
        ],
        gates: &["G6"],
        doubles: &["LenientCount"],
        unbreakable: "",
    },
    Rule {
        id: "R4.7",
        summary: "an empty probe key or one under emq: is invalid, nothing sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &[
            "invalid-pipeline-probe-emq-key",
            "invalid-pipeline-probe-args",
        ],
        gates: &["G6"],
        doubles: &["LenientProbeKey"],
        unbreakable: "",
    },
    Rule {
        id: "R4.8",
        summary: "a verb on an unknown session is invalid, nothing sent",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &["session-unknown-invalid", "session-disconnect-then-invalid"],
        gates: &["G6"],
        doubles: &["FallbackSession", "ZombieSession"],
        unbreakable: "",
    },
    Rule {
        id: "R4.9",
        summary: "EVALSHA first; one SCRIPT LOAD per NOSCRIPT miss; never EVAL; no error after SCRIPT FLUSH",
        checks: &[
            "G3: commandstats: EVALSHA per transition, loads per flush",
            "G3: an engine error reply (WRONGTYPE) of each transition costs one EVALSHA and no SCRIPT LOAD",
        ],
        cases: &[],
        gates: &["G3"],
        doubles: &["LoadEveryCall", "ReloadOnAnyError"],
        unbreakable: "",
    },
    Rule {
        id: "R4.10",
        summary: "only the bundle's SHAs reach the engine",
        checks: &["G2: the script cache holds only bundle SHAs"],
        cases: &[],
        gates: &["G2"],
        doubles: &["ForeignScripts"],
        unbreakable: "",
    },
    Rule {
        id: "R4.11",
        summary: "pipeline_probe sends n INCR as one pipeline (< n/10 engine reads), replies 1..=n in order",
        checks: &[
            "G5: replies 1..=10000 in order, the key holds 10000",
            "G5: INFO stats total_reads_processed grew by < n/10",
        ],
        cases: &["pipeline-probe-in-order", "pipeline-probe-hundred"],
        gates: &["G5"],
        doubles: &["Unpipelined"],
        unbreakable: "",
    },
    Rule {
        id: "R4.12",
        summary: "batch sends n EVALSHA enqueues in pipelines of depth (< n/10 engine reads) and lands whole",
        checks: &[
            "G5: reply, pending_size, seq and first/last ids agree with n",
            "G5: INFO stats total_reads_processed grew by < n/10",
        ],
        cases: &[
            "batch-returns-n",
            "batch-large",
            "batch-over-queues",
            "invalid-batch-queues",
        ],
        gates: &["G5"],
        doubles: &["ShortBatch", "Unpipelined"],
        unbreakable: "",
    },
    Rule {
        id: "R4.13",
        summary: "a connector's commands on EchoMQ keys are bundle EVALSHA, the two reads, the fence and the probe INCR only",
        checks: &["G8: every MONITOR'd command from the connector"],
        cases: &[],
        gates: &["G8"],
        doubles: &["RawComplete"],
        unbreakable: "",
    },
    Rule {
        id: "R4.14",
        summary: "no job is lost, duplicated or orphaned, even when connections or the process are killed",
        checks: &[
            "G6: keyspace and seq",
            "G7: the model's accounting",
            "G8: accounting after kills",
        ],
        cases: &["enqueue-ids-increment", "mint-batch-then-enqueue"],
        gates: &["G6", "G7"],
        doubles: &["EnqueueTwice"],
        unbreakable: "",
    },
    Rule {
        id: "R4.16",
        summary: "after a lost reply: kind engine, never a made-up reply, never re-sent behind the caller's back",
        checks: &["G8: the fault phase's accounting of indeterminate calls through the proxy"],
        cases: &[],
        gates: &["G8"],
        doubles: &[
            "ResendAfterLostReply",
            "PythonRetryOnError",
            "AckUnsent",
            "SwallowConnectionErrors",
        ],
        unbreakable: "",
    },
    Rule {
        id: "R4.15",
        summary: "one module owns the raw client and the key schema (a lint)",
        checks: &[
            "clippy.toml and the reference's #[expect]; connectors/python/tests/test_seam.py",
        ],
        cases: &[],
        gates: &[],
        doubles: &[],
        unbreakable: "a property of the connector's source, not of its behaviour: the gate sees only \
                      the wire and the engine, so the connector's own lint enforces it",
    },
    Rule {
        id: "R5.1",
        summary: "JSON lines: exactly one response per request, in order, echoing seq",
        checks: &["every gate: a wrong seq, a non-JSON line or silence is a connector failure"],
        cases: &[],
        gates: &["G1"],
        doubles: &["fixture:wire_wrong_seq.py"],
        unbreakable: "",
    },
    Rule {
        id: "R5.2",
        summary: "each ok value has the shape the table gives for its cmd",
        checks: &["G6: replies compared as typed values"],
        cases: &["complete-active-true", "complete-double"],
        gates: &["G6"],
        doubles: &["fixture:wire_shapes.py"],
        unbreakable: "",
    },
    Rule {
        id: "R5.3",
        summary: "hello names the bundle and the sha1 of every script the connector sends",
        checks: &["G2: hello's scripts equal the bundle's SHAs"],
        cases: &[],
        gates: &["G2"],
        doubles: &["fixture:wire_hello_shas.py"],
        unbreakable: "",
    },
    Rule {
        id: "R5.4",
        summary: "an engine error reply or a failed connection is kind engine",
        checks: &["G6: error-engine-* cases (setup gives keys of the wrong type)"],
        cases: &[
            "error-engine-wrong-type-pending",
            "error-engine-wrong-type-active",
        ],
        gates: &["G6"],
        doubles: &["EngineAsInternal"],
        unbreakable: "",
    },
    Rule {
        id: "R5.5",
        summary: "a command or hello protocol not implemented is kind unsupported",
        checks: &["G6: hello-other-protocol-unsupported"],
        cases: &["hello-other-protocol-unsupported"],
        gates: &["G6"],
        doubles: &["HelloAnyProtocol"],
        unbreakable: "",
    },
    Rule {
        id: "R5.6",
        summary: "kind internal is for anything else: a connector bug",
        checks: &[
            "every case pins the kind of each expected error, so internal never stands in for one",
        ],
        cases: &[],
        gates: &[],
        doubles: &[],
        unbreakable: "a residual kind: no request can provoke a bug on purpose. Reporting internal \
                      where another kind is due breaks that kind's rule (R5.4, R4.1–R4.8, R3.4, \
                      R5.5), and each has its double",
    },
    Rule {
        id: "R5.7",
        summary: "several sessions live in one process, each on its own engine connection",
        checks: &["G6: session-* cases with two sessions"],
        cases: &["session-disconnect-one-other-continues"],
        gates: &["G6"],
        doubles: &["SharedConnection"],
        unbreakable: "",
    },
    Rule {
        id: "R5.8",
        summary: "every request is answered within the harness's timeout",
        checks: &["every gate: silence past the timeout is a connector failure"],
        cases: &[],
        gates: &["G1"],
        doubles: &["fixture:hang.py"],
        unbreakable: "",
    },
    Rule {
        id: "R5.9",
        summary: "on stop the connector sends nothing and exits 0",
        checks: &["tests/child.rs: the process group is ended whatever the connector does"],
        cases: &[],
        gates: &[],
        doubles: &[],
        unbreakable: "not judged by a gate: stop is the harness's last word, and it ends the \
                      process group either way, so a connector that answers or exits non-zero \
                      changes no verdict",
    },
    Rule {
        id: "R5.10",
        summary: "after disconnect the session is unknown (every verb invalid, nothing sent); connect makes it afresh",
        checks: &[INVALID_SENDS_NOTHING],
        cases: &["session-disconnect-then-invalid"],
        gates: &["G6"],
        doubles: &["ZombieSession"],
        unbreakable: "",
    },
    Rule {
        id: "R8.1",
        summary: "on a cluster: connect with a cluster client from the seed, route every call by slot, follow MOVED/ASK and nothing else",
        checks: &[
            "G1-G8 on --engine cluster: every verb succeeds on queues of every primary",
            "G3: the rounds run on one queue per primary",
        ],
        cases: &[],
        gates: &["G3"],
        doubles: &["SeedNodeOnly"],
        unbreakable: "",
    },
    Rule {
        id: "R8.2",
        summary: "on a cluster: NOSCRIPT is answered by SCRIPT LOAD on the node that said it",
        checks: &[
            "G3: after SCRIPT FLUSH on every primary, each primary's script|load is one per script",
        ],
        cases: &[],
        gates: &["G3"],
        doubles: &["LoadOnSeedOnly"],
        unbreakable: "",
    },
    Rule {
        id: "R8.3",
        summary: "on a cluster: a batch over queues on several nodes is pipelined per node",
        checks: &[
            "G5: a batch over 12 queues covering every primary lands whole, each queue in order",
            "G5: each primary received its share in fewer than one read per 10 commands",
        ],
        cases: &[],
        gates: &["G5"],
        doubles: &["UngroupedBatch"],
        unbreakable: "",
    },
    Rule {
        id: "R8.4",
        summary: "on a cluster: after a graceful failover the connector follows MOVED; no job lost, duplicated or orphaned",
        checks: &[
            "G8: CLUSTER FAILOVER of a seeded shard mid-loop, then 300 rounds without an error",
            "G8: every acknowledged job completed exactly once, none left in any set",
        ],
        cases: &[],
        gates: &["G8"],
        doubles: &["NoRedirects"],
        unbreakable: "",
    },
];

/// The rule ids SPEC's text declares (`**R<n>.<m>**`), in order of first appearance.
pub fn spec_ids(spec: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for part in spec.split("**R").skip(1) {
        let Some(end) = part.find("**") else { continue };
        let id = &part[..end];
        let mut nums = id.splitn(2, '.');
        let ok = |s: Option<&str>| {
            s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        };
        if ok(nums.next()) && ok(nums.next()) {
            let id = format!("R{id}");
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

/// The catalogue as text, for `emq-gate rules`.
pub fn text() -> String {
    let mut s = String::new();
    let breakable = CATALOGUE.iter().filter(|r| r.breakable()).count();
    s.push_str(&format!(
        "{} rules in bundle/SPEC.md; {breakable} breakable, each with a double the gate must FAIL\n",
        CATALOGUE.len()
    ));
    for r in CATALOGUE {
        s.push_str(&format!("\n{} {}\n", r.id, r.summary));
        for c in r.checks {
            s.push_str(&format!("  check: {c}\n"));
        }
        if !r.cases.is_empty() {
            s.push_str(&format!("  cases: {}\n", r.cases.join(", ")));
        }
        if r.breakable() {
            s.push_str(&format!(
                "  killed by: {} at {}\n",
                r.doubles.join(", "),
                r.gates.join(", ")
            ));
        } else {
            s.push_str(&format!("  unbreakable: {}\n", r.unbreakable));
        }
    }
    s
}
