//! [`TLS`]: the rules of SPEC §10 (over TLS), in SPEC's order.

use super::{Rule, RuleId};
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
        doubles: &[Double::CaFileUnchecked],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(10, 2),
        summary: "every connection of a rediss:// session speaks TLS from its first byte, never falling back to plaintext",
        checks: &[
            "G1-G8 on a TLS engine: every TLS front reads each connection's first byte; one that is not a TLS handshake record fails the gate running",
        ],
        cases: &[],
        gates: &[GateId::G1],
        doubles: &[Double::PlaintextOnRediss],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(10, 3),
        summary: "the server's chain must verify to a CA of ca_file: another CA's certificate, or an expired one, is refused (kind engine, nothing sent)",
        checks: &[
            "G1 on a TLS engine: the front presents a certificate of another CA, then an expired one; each connect fails with kind engine and no handshake completes",
        ],
        cases: &[],
        gates: &[GateId::G1],
        doubles: &[Double::TrustAnyCertificate],
        unbreakable: "",
    },
    Rule {
        id: RuleId::new(10, 4),
        summary: "the certificate must name the host the connection was opened to (the url's, or the slot map's host name)",
        checks: &[
            "G1 on a TLS engine: the front presents a certificate of the run's CA for another name; the connect fails with kind engine and no handshake completes",
        ],
        cases: &[],
        gates: &[GateId::G1],
        doubles: &[Double::TrustAnyCertificate, Double::NameUnchecked],
        unbreakable: "",
    },
];
