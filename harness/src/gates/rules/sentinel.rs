//! [`SENTINEL`]: the rules of SPEC §11 (behind Sentinel), in SPEC's order.

use super::{How, Rule, RuleId, Way};
use crate::doubles::Double;
use crate::gates::GateId;

/// Every rule of SPEC §11, in SPEC's order.
pub const SENTINEL: &[Rule] = &[
    Rule {
        id: RuleId::new(11, 1),
        summary: "connect asks the Sentinels in the order given, skipping one that refuses, is silent past a bounded time, errs or knows no such name",
        checks: &[
            "G1 on a Sentinel engine: with the first Sentinel refusing every connection, then silent (its proxy reads and answers nothing), connect and an enqueue succeed within R5.8's timeout",
            "G1 on a Sentinel engine: with every Sentinel naming a node that takes the connection (and its TLS) and answers nothing, connect fails with kind engine within R5.8's timeout",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::TooFew,
                "the first Sentinel only: one that refuses fails connect (redis-rs before 1.7 let the first answer decide)",
                &[Double::SentinelFirstOnly],
            ),
            Way::by(
                How::TooLate,
                "no bound on a Sentinel, or on the node it names: a silent one holds connect past the request's timeout (redis-rs's sync path has no connect timeout, redis-py's socket_timeout is None; a library's AUTH inside its dial waits on the reply timeout)",
                &[Double::SentinelNoTimeout, Double::SentinelNamedNoTimeout],
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(11, 2),
        summary: "ROLE on every connection to a node a Sentinel named, before anything else is sent there; a node that is not the primary is closed and the next Sentinel asked",
        checks: &[
            "G1 on a Sentinel engine: the first Sentinel's proxy names a replica; the connector's connections to that replica carry their set-up and ROLE only, and connect and an enqueue succeed",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::Never,
                "the node a Sentinel names used as it is (redis-py, go-redis, node-redis 5: no ROLE check)",
                &[Double::SentinelNoRole],
            ),
            Way::not(
                How::OnAnother,
                "ROLE asked on a connection of its own, then another opened for the session (redis-rs's check-then-use)",
                "no gate can make the node change between the two connections on every run: the stale Sentinel's replica answers ROLE slave on each, so such a connector moves on as the rule asks",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(11, 3),
        summary: "a lost connection, a timeout or READONLY makes the primary stale: the call fails and is never sent again, and the next call finds the primary afresh, reads the fence and loads its scripts there, across graceful and unclean failovers alike",
        checks: &[
            "G8 on a Sentinel engine: the primary's proxy answers each script on a session's open connections READONLY; the session's next calls must succeed within three",
            "G8 on a Sentinel engine: SENTINEL FAILOVER with two sessions connected, one working and one idle; once every Sentinel names the new primary each session succeeds within three calls and every call after, each new connection reads the fence before its first script",
            "G8 on a Sentinel engine: a crew of sessions works through a coordinated SENTINEL FAILOVER, then while the primary is killed, then while the new one is stalled past down-after-milliseconds and woken; every worker claims again within R8.10's bound after the announcement (every Sentinel names the new primary; after a stall or a failover the old primary follows it), and every acknowledged job is attributed to the engine's replication window or to the connector",
        ],
        cases: &[],
        gates: &[GateId::G8],
        ways: &[
            Way::by(
                How::Otherwise,
                "READONLY taken as the call's error only, the connection kept: every later script meets it again (Redix, redis-rs)",
                &[Double::SentinelReadonlyFinal],
            ),
            Way::by(
                How::Never,
                "the address found at connect dialled again after a loss, never asked anew (node-redis 5 #3061, rustis #51)",
                &[Double::SentinelStickyAddress],
            ),
            Way::not(
                How::Twice,
                "the failed call sent again on the new primary",
                "R4.17's fault phase judges it on this engine as on one node: a connector that re-sends after a lost reply fails G8 there, whatever found the primary",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(11, 4),
        summary: "a Sentinel is asked only what a client asks (get-master-addr-by-name, sentinels, +switch-master and the connection's set-up)",
        checks: &[
            "G1-G8 on a Sentinel engine: after every gate every Sentinel's ACL LOG is read; a command refused to the connector's user fails the gate (G1 first: every connect asks the Sentinels)",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::TooMany,
                "SENTINEL MASTERS to find the primary (redis-py's Sentinel, redis-rs's sentinel module)",
                &[Double::SentinelMasters],
            ),
            Way::not(
                How::Otherwise,
                "other credentials on the Sentinels than the url's (a client with separate Sentinel settings left empty)",
                "R4.19's AUTH check sees it on every Sentinel as on every data node: a failed AUTH in a Sentinel's ACL LOG fails the gate like one on a node",
            ),
        ],
        unbreakable: "",
    },
];
