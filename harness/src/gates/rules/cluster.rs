//! [`CLUSTER`]: the rules of SPEC §8 (a Valkey Cluster), in SPEC's order.

use super::{How, Rule, RuleId, Way};
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
        ways: &[
            Way::by(
                How::Otherwise,
                "the cluster flag ignored: a plain connection to the seed only",
                &[Double::SeedNodeOnly],
            ),
            Way::not(
                How::Never,
                "MOVED never followed",
                "before a failover the slot map read from the seed is right and no MOVED comes; after one it is R8.4's way (NoRedirects)",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 12),
        summary: "on a cluster: a chain of redirects is followed, at least three for one call, within the request's timeout",
        checks: &[
            "G8: a session whose slot map predates an atomic migration enqueues while the slot goes home the legacy way: MOVED to the new owner, ASK home, and the enqueue succeeds",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::TooFew,
                "a chain cut after the first redirect: a MOVED from the node a MOVED named reported as the call's error",
                &[Double::OneRedirect],
            ),
            Way::not(
                How::TooMany,
                "a chain followed without a bound",
                "each of the engine's migrations ends, so no chain the gate makes is endless; a connector that never gives up on one is R5.8's silence",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 13),
        summary: "on a cluster: an endpoint the engine leaves unnamed (a null or empty host in the slot map, an empty host in MOVED/ASK) is the host of the node that answered",
        checks: &[
            "G8 on the plain cluster, every node at cluster-preferred-endpoint-type unknown-endpoint: a session connected then enqueues on a queue of every primary; a session whose map predates a slot's move enqueues there (MOVED <slot> :<port>) and on a slot in migration (ASK <slot> :<port>); each call succeeds on the node named",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "the empty host of a redirect dialled as it is",
                &[Double::EmptyHostDialed],
            ),
            Way::not(
                How::Otherwise,
                "the empty host taken for the local machine",
                "every node the harness boots runs on the harness's machine, so a connector that dials the local machine for an empty host reaches the right node; only a cluster on several machines tells it apart",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 5),
        summary: "on a cluster: the session works in the url's database on every node connection; the engine, not the client, refuses a database",
        checks: &[
            "every gate on a cluster: the url names database 9, the only one the connector's user may use (db=9), so a keyed command on a connection left in database 0 answers NOPERM",
            "G1 on a cluster: connect with /3 (forbidden) and /16 (out of range) fails with kind engine",
            "G8 on a cluster: calls that follow MOVED and ASK in the live migrations, and sessions whose connections were killed, succeed in database 9",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "the url's database dropped on a cluster: every node connection in database 0",
                &[Double::ClusterDatabaseDropped],
            ),
            Way::by(
                How::OnAnother,
                "SELECT on the seed's connection only, not on the other nodes'",
                &[Double::SelectSeedOnly],
            ),
            Way::by(
                How::Never,
                "no SELECT on a connection opened to follow MOVED or ASK",
                &[Double::SelectNotOnRedirect],
            ),
            Way::by(
                How::Never,
                "no SELECT on a connection that replaces a failed one",
                &[Double::NoReselectAfterReconnect],
            ),
            Way::not(
                How::Refused,
                "a database refused by the client itself (kind invalid)",
                "every gate connects its cluster sessions to database 9, so such a connector fails every gate at connect and never ships; G1's /3 and /16 connects say so in words",
            ),
        ],
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
        ways: &[
            Way::by(
                How::OnAnother,
                "SCRIPT LOAD on the seed, not on the node that said NOSCRIPT",
                &[Double::LoadOnSeedOnly],
            ),
            Way::not(
                How::Never,
                "a promoted replica's empty cache never loaded",
                "its first call meets NOSCRIPT like any primary after a flush, and G3 flushes every primary and counts each one's loads",
            ),
        ],
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
        ways: &[
            Way::by(
                How::OnAnother,
                "a batch over several nodes sent as one pipeline to one node",
                &[Double::UngroupedBatch],
            ),
            Way::not(
                How::TooMany,
                "a node's share deeper than depth",
                "the depth of a node's pipeline is R4.12's, judged on a cluster through the proxy of the queue's node as on one engine (DeepBatch)",
            ),
        ],
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
        ways: &[
            Way::by(
                How::Never,
                "MOVED after a failover never followed",
                &[Double::NoRedirects],
            ),
            Way::by(
                How::Twice,
                "a node's pipeline or a call re-sent after a lost reply (redis-py's ClusterPipeline, RedisCluster's retry)",
                &[Double::ResendClusterPipeline, Double::PythonClusterRetry],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 6),
        summary: "on a cluster: during a slot migration every call succeeds: ASK is answered by ASKING and the call on the named node, an atomic migration's cut-over is waited out",
        checks: &[
            "G8: a live migration of a queue's slot; with its keys on the target every verb on the queue succeeds",
            "G8: where the engine has CLUSTER MIGRATESLOTS, the slot moves atomically while the worker and a crew of three sessions work the queue; every call of each before, during and after the cut-over succeeds, every acknowledged job is completed once",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "ASK reported as the call's error",
                &[Double::IgnoresAsk],
            ),
            Way::by(
                How::TooFew,
                "ASK followed without ASKING first",
                &[Double::AskWithoutAsking],
            ),
        ],
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
        ways: &[
            Way::by(
                How::Otherwise,
                "TRYAGAIN reported as no job",
                &[Double::TryagainAsNothing],
            ),
            Way::not(
                How::Twice,
                "TRYAGAIN retried without a bound",
                "the call did not run, so a retry that lands does so once, and one that outlasts the request's timeout is R5.8's silence",
            ),
        ],
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
        ways: &[
            Way::by(
                How::OnAnother,
                "after a redirect, SCRIPT LOAD where the slot map says, not on the node that said NOSCRIPT",
                &[Double::LoadsWhereSlotMapSays],
            ),
            Way::not(
                How::Never,
                "NOSCRIPT after ASK reported as the call's error",
                "G8 requires every verb on the migrating queue to succeed, so an error there fails the same check IgnoresAsk fails",
            ),
        ],
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
        ways: &[
            Way::by(
                How::Opened,
                "a killed node connection replaced silently, a script sent before a fresh fence read (redis-py's cluster pool)",
                &[
                    Double::SilentNodeReconnect,
                    Double::PythonSilentNodeReconnect,
                ],
            ),
            Way::not(
                How::TooEarly,
                "only a fence read made before the failure counted",
                "no connector plausibly remembers when it last read the fence; one reads it again on the new connection or not at all, the way above",
            ),
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
        ways: &[
            Way::by(
                How::Never,
                "the session gives up after an engine error: no worker claims again after the failover",
                &[Double::GivesUpAfterError],
            ),
            Way::by(
                How::Twice,
                "an enqueue re-sent after its connection was reset",
                &[Double::ResendEnqueueAfterReset],
            ),
            Way::not(
                How::TooFew,
                "a job the promoted replica had lost by the connector",
                "no connector can delete an acknowledged job without a script call the fault phase and the attribution would name; the attribution judges it on every run",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(8, 11),
        summary: "on a cluster: a lost connection, MOVED or READONLY makes the slot map stale: the next call reads it again on fresh connections (and the fence, R8.9), never re-sending the failed call",
        checks: &[
            "G8: after the SIGKILL every worker claims on the shard again (a session that keeps the dead node's connection does not)",
            "G8: after the SIGSTOP the woken node's proxy answers READONLY on every connection opened before; every worker claims on the shard again",
            "G8: after the live migration the worker's calls on the moved slot stop meeting MOVED (batches of ten rounds until one meets none; a session that keeps its map never has one)",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Never,
                "the slot map never read again after a node died",
                &[Double::StaleSlotMapAfterDeath],
            ),
            Way::by(
                How::Otherwise,
                "READONLY taken as the call's final answer",
                &[Double::ReadonlyFinal],
            ),
            Way::by(
                How::Never,
                "the slot map kept after a MOVED: every later call on the slot meets MOVED again",
                &[Double::MovedNoRefresh],
            ),
            Way::not(
                How::Twice,
                "the failed call re-sent on the fresh connections",
                "that is R4.17's way, judged by the fault phase on every node (ResendEnqueueAfterReset)",
            ),
        ],
        unbreakable: "",
    },
];
