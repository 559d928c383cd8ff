//! [`TLS`]: the rules of SPEC §10 (over TLS), in SPEC's order.

use super::{How, Rule, RuleId, Way};
use crate::doubles::Double;
use crate::gates::GateId;

/// Every rule of SPEC §10, in SPEC's order.
pub const TLS: &[Rule] = &[
    Rule {
        id: RuleId::new(10, 1),
        summary: "rediss:// with connect's ca_file: trust its CAs only; a ca_file with redis://, or one that cannot be read, is invalid and nothing is sent; no TLS answers unsupported",
        checks: &[
            "G1 on a TLS engine: a ca_file naming no file is kind invalid, and no connection reaches the TLS front",
            "G1-G8 on a TLS engine: every connect is rediss:// with the run's CA",
        ],
        cases: &["connect-ca-file-needs-rediss"],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::Accepted,
                "a ca_file that cannot be read taken, the system's store trusted instead (kind engine, not invalid)",
                &[Double::CaFileUnchecked],
            ),
            Way::not(
                How::TooMany,
                "the system's trust store trusted beside ca_file",
                "no gate can see it: the run's CA and the other CA G1 presents are made per run and are in no system store, so trusting the store as well refuses what the gate presents all the same",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(10, 2),
        summary: "every connection of a rediss:// session speaks TLS from its first byte, never falling back to plaintext",
        checks: &[
            "G1-G8 on a TLS engine: every TLS front (every node's and every Sentinel's) reads each connection's first byte; one that is not a TLS handshake record fails the gate running",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::Otherwise,
                "a rediss:// url taken as redis://: plaintext to a TLS server",
                &[Double::PlaintextOnRediss],
            ),
            Way::by(
                How::TooFew,
                "TLS to the data nodes, plaintext to the Sentinels (redis-py's Sentinel without TLS in sentinel_kwargs)",
                &[Double::PlaintextToSentinels],
            ),
            Way::not(
                How::TooFew,
                "TLS on the seed only, the nodes a cluster client discovers in plaintext (node-redis)",
                "on a cluster every node's TLS front reads each connection's first byte, the same check that sees PlaintextOnRediss on the seed; a double of its own would only repeat it on another port",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(10, 3),
        summary: "the server's chain must verify to a CA of ca_file: another CA's certificate, or an expired one, is refused (kind engine, nothing sent)",
        checks: &[
            "G1 on a TLS engine: the front presents a certificate of another CA, then an expired one; each connect fails with kind engine and no handshake completes",
            "G1 on a TLS cluster: the front of a primary other than the seed presents a certificate of another CA from before connect; the call routed to it fails with kind engine and no handshake with it completes",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::Accepted,
                "another CA's or an expired certificate trusted (redis-rs's #insecure)",
                &[Double::TrustAnyCertificate],
            ),
            Way::by(
                How::TooFew,
                "the seed verified, the nodes a cluster client discovers not (TLS options given to the seed only)",
                &[Double::TrustOnSeedOnly],
            ),
            Way::not(
                How::Otherwise,
                "a refused handshake reported as another kind than engine",
                "internal or invalid for a failed handshake breaks R5.4's kinds, judged with EngineAsInternal's check; no TLS library reports one as a success",
            ),
        ],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(10, 4),
        summary: "the certificate must name the host the connection was opened to (the url's, or the slot map's host name: CLUSTER SHARDS' endpoint, never its ip)",
        checks: &[
            "G1 on a TLS engine: the front presents a certificate of the run's CA for another name; the connect fails with kind engine and no handshake completes",
            "G1 on a TLS cluster: a discovered primary's front presents it; the call routed there fails with kind engine and no handshake with it completes",
            "G1 on a TLS cluster: with every front presenting the good certificate, a batch over a queue of every primary succeeds (each node dialled by the slot map's host name, not its address)",
        ],
        cases: &[],
        gates: &[GateId::G1],
        ways: &[
            Way::by(
                How::Accepted,
                "a certificate of the right CA for another name trusted (redis-rs's set_danger_accept_invalid_hostnames)",
                &[Double::NameUnchecked],
            ),
            Way::by(
                How::Accepted,
                "no certificate checked at all",
                &[Double::TrustAnyCertificate],
            ),
            Way::by(
                How::TooFew,
                "names checked on the seed only",
                &[Double::TrustOnSeedOnly],
            ),
            Way::by(
                How::Otherwise,
                "a cluster's nodes dialled by address where the slot map names a host (CLUSTER SHARDS' ip, not its endpoint)",
                &[Double::ShardsIpOnly],
            ),
        ],
        unbreakable: "",
    },
];
