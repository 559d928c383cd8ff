//! [`CLUSTER`]: the rules of SPEC §8 (a Valkey Cluster), in SPEC's order.

use super::{Rule, RuleId};
use crate::doubles::Double;
use crate::gates::GateId;

/// Every rule of SPEC §8, in SPEC's order.
pub const CLUSTER: &[Rule] = &[
    Rule {
        id: RuleId::new(8, 1),
        summary: "on a cluster: connect with a cluster client from the seed, route every call by slot, follow MOVED/ASK and nothing else",
        checks: &[
            "G1-G8 on --engine cluster: every verb succeeds on queues of every primary",
            "G3: the rounds run on one queue per primary",
        ],
        cases: &[],
        gates: &[GateId::G3],
        doubles: &[Double::SeedNodeOnly],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 5),
        summary: "on a cluster: a url naming a database other than 0 is invalid; one naming none connects",
        checks: &[
            "G1 on a cluster: connect with /3 is kind invalid, without a database it connects",
        ],
        cases: &[],
        gates: &[GateId::G1],
        doubles: &[Double::ClusterAnyDatabase],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 2),
        summary: "on a cluster: NOSCRIPT is answered by SCRIPT LOAD on the node that said it",
        checks: &[
            "G3: after SCRIPT FLUSH on every primary, each primary's script|load is one per script",
        ],
        cases: &[],
        gates: &[GateId::G3],
        doubles: &[Double::LoadOnSeedOnly],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 3),
        summary: "on a cluster: a batch over queues on several nodes is pipelined per node",
        checks: &[
            "G5: a batch over 12 queues covering every primary lands whole, each queue in order",
            "G5: each primary received its share in fewer than one read per 10 commands",
        ],
        cases: &[],
        gates: &[GateId::G5],
        doubles: &[Double::UngroupedBatch],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 4),
        summary: "on a cluster: the fault phase through the proxy of every node (no re-send after a lost reply, R4.17); after a graceful failover the connector follows MOVED; no job lost, duplicated or orphaned",
        checks: &[
            "G8: the fault phase on a cluster, each fault armed on the proxy of the node that owns the queue's slot, judged by the same accounting",
            "G8: CLUSTER FAILOVER of a seeded shard mid-loop, then 300 rounds without an error",
            "G8: every acknowledged job completed exactly once, none left in any set",
        ],
        cases: &[],
        gates: &[GateId::G8],
        doubles: &[
            Double::NoRedirects,
            Double::ResendClusterPipeline,
            Double::PythonClusterRetry,
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 6),
        summary: "on a cluster: ASK is answered by ASKING and the call on the named node",
        checks: &[
            "G8: a live migration of a queue's slot; with its keys on the target every verb on the queue succeeds",
        ],
        cases: &[],
        gates: &[GateId::G8],
        doubles: &[Double::IgnoresAsk, Double::AskWithoutAsking],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 7),
        summary: "on a cluster: TRYAGAIN means the call did not run: retried after a pause or kind engine, never a success or an empty result",
        checks: &[
            "G8: a claim that meets TRYAGAIN returns a job exactly once or kind engine with the queue untouched",
        ],
        cases: &[],
        gates: &[GateId::G8],
        doubles: &[Double::TryagainAsNothing],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 8),
        summary: "on a cluster: a NOSCRIPT from the node a redirect named is answered by SCRIPT LOAD on that node",
        checks: &[
            "G8: the migration target's script cache is flushed before the calls that follow ASK there",
        ],
        cases: &[],
        gates: &[GateId::G8],
        doubles: &[Double::LoadsWhereSlotMapSays],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 9),
        summary: "on a cluster: a node connection that replaces a failed one sends no script before a fence read made since the failure",
        checks: &[
            "G8: MONITOR on every primary through the crash phase, each kill marked: a connection opened on a node after a kill there comes after a fence read made since the kill",
        ],
        cases: &[],
        gates: &[GateId::G8],
        doubles: &[
            Double::SilentNodeReconnect,
            Double::PythonSilentNodeReconnect,
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 10),
        summary: "on a cluster: across an unclean failover a session keeps working: an engine error fails one call, never the session; no job the promoted replica had is lost, none run twice or left claimed",
        checks: &[
            "G8: a crew (producer, two workers, reaper) runs through a SIGKILL and a SIGSTOP of a seeded shard's primary; every worker claims on that shard again within twice the failover plus twenty of its slowest calls",
            "G8: every acknowledged job attributed: lost beyond the promoted replica's offset is the engine's (counted), lost within it, completed twice, enqueued twice or unexpected is the connector's",
        ],
        cases: &[],
        gates: &[GateId::G8],
        doubles: &[Double::GivesUpAfterError, Double::ResendEnqueueAfterReset],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 11),
        summary: "on a cluster: a lost connection, MOVED or READONLY makes the slot map stale: the next call reads it again on fresh connections (and the fence, R8.9), never re-sending the failed call",
        checks: &[
            "G8: after the SIGKILL every worker claims on the shard again (a session that keeps the dead node's connection does not)",
            "G8: after the SIGSTOP the woken node's proxy answers READONLY on every connection opened before; every worker claims on the shard again",
        ],
        cases: &[],
        gates: &[GateId::G8],
        doubles: &[Double::StaleSlotMapAfterDeath, Double::ReadonlyFinal],
        unbreakable: "",
    },
];
