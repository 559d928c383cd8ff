//! The permissions SPEC grants a connector (`**P<section>.<n>**`: a *may*, an *either/or*, a
//! "both are fine", an "allowed"), beside the rules they refine. A rule's ways say how a
//! connector breaks it and which doubles must FAIL; a permission says what a connector may do
//! instead and which double takes that path and must PASS every gate (`crate::doubles::permits`).
//! A check stricter than its rule is invisible to broken doubles: only a connector that takes
//! the permitted path meets it, and that is a false FAIL on a connector that follows SPEC.
//!
//! Kept in step with SPEC by the tests below and `super::grants_without_permission`: every unit
//! of SPEC whose prose grants something declares a `P` id, every id is here in SPEC's order,
//! and every entry names a double that takes it or says why none needs to. `tests/permits.rs`
//! runs each double through every gate, on every engine its permission is about.

use super::RuleId;
use crate::doubles::permits::Taker;

/// One permission of SPEC.
#[derive(Debug, Clone, Copy)]
pub struct Permit {
    /// `P<section>.<n>`, as bold in SPEC.
    pub id: &'static str,
    /// The rule it refines.
    pub rule: RuleId,
    /// What a connector may do, in a line.
    pub what: &'static str,
    /// The doubles that take it; each must PASS every gate on every engine.
    pub takers: &'static [Taker],
    /// Empty when a double takes it; otherwise why none needs to (no gate can tell the paths
    /// apart, because the harness never sends what would).
    pub untaken: &'static str,
}

/// Why a permission needs no double: the harness never sends the input it is about.
const NEVER_SENT: &str = "the harness never sends that input, so no gate sees which path a \
                          connector takes";

/// Why a permission about the bundle's version needs no double.
const SAME_VERSION: &str = "the harness always names the version of the bundle it passes, so a \
                            connector that compares them never refuses";

/// Every permission of SPEC, in SPEC's order.
pub const PERMITS: &[Permit] = &[
    Permit {
        id: "P2.1",
        rule: RuleId::new(2, 5),
        what: "browse's payloads by HGET per id or by HMGET",
        takers: &[Taker::HmgetPayloads, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P3.1",
        rule: RuleId::new(3, 5),
        what: "a read verb (browse, pending_size) before the fence read on a new connection",
        takers: &[Taker::ReconnectReadsFirst, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P3.2",
        rule: RuleId::new(3, 5),
        what: "after a lost connection, reconnect by itself on the next verb (the fence read first) or fail that verb with kind engine (the reference)",
        takers: &[Taker::ReconnectReadsFirst, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P3.3",
        rule: RuleId::new(3, 4),
        what: "after a failed connect, a name that was connected keeps its old session or loses it",
        takers: &[],
        untaken: "no gate depends on it: the harness connects a name afresh before using it again",
    },
    Permit {
        id: "P3.4",
        rule: RuleId::new(5, 4),
        what: "a connect whose new connection is closed before a byte is read dials again by itself (the fence read) or fails with kind engine (the reference)",
        takers: &[Taker::RedialsAtConnect, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.1",
        rule: RuleId::new(4, 1),
        what: "1.0 and 1e3 read as the integers 1 and 1000, or refused (invalid; unsupported in hello's protocol)",
        takers: &[],
        untaken: NEVER_SENT,
    },
    Permit {
        id: "P4.2",
        rule: RuleId::new(4, 11),
        what: "a pipeline's bytes cut into writes as the connector likes (one write, or one per command)",
        takers: &[Taker::WritePerCommand, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.3",
        rule: RuleId::new(4, 12),
        what: "one enqueue of a batch alone first (to load the script), then pipelines of depth",
        takers: &[Taker::LoneFirstEnqueue, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.4",
        rule: RuleId::new(4, 12),
        what: "a failed batch's message says how many enqueues landed",
        takers: &[],
        untaken: "no gate reads an error's message, only its kind",
    },
    Permit {
        id: "P4.5",
        rule: RuleId::new(4, 19),
        what: "DISCARD to end a transaction its client library could not finish",
        takers: &[Taker::GreetsEachConnection, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.6",
        rule: RuleId::new(4, 19),
        what: "HELLO 3 AUTH user password in place of AUTH: RESP2 or RESP3",
        takers: &[Taker::Resp3Hello, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.7",
        rule: RuleId::new(4, 19),
        what: "PING on any connection, new or idle",
        takers: &[
            Taker::GreetsEachConnection,
            Taker::PingsEveryVerb,
            Taker::Permissive,
        ],
        untaken: "",
    },
    Permit {
        id: "P4.8",
        rule: RuleId::new(4, 19),
        what: "CLIENT SETNAME and CLIENT SETINFO on every connection (the reference's client library sends SETINFO)",
        takers: &[Taker::GreetsEachConnection, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.9",
        rule: RuleId::new(4, 19),
        what: "the slot map read with CLUSTER SLOTS (the reference), SHARDS or NODES",
        takers: &[Taker::ReadsEverySlotMap, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.10",
        rule: RuleId::new(4, 18),
        what: "after a timeout, drop the connection, or read and discard the late reply, or match replies to requests",
        takers: &[Taker::ShortestReadTimeout, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.11",
        rule: RuleId::new(4, 18),
        what: "a read timeout anywhere from 3 s to 60 s (the reference: 60 s)",
        takers: &[Taker::ShortestReadTimeout, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.12",
        rule: RuleId::new(4, 15),
        what: "the seam kept by a lint or by a source test of the connector's own",
        takers: &[],
        untaken: "no gate can see a connector's sources (R4.15)",
    },
    Permit {
        id: "P5.1",
        rule: RuleId::new(2, 1),
        what: "EMQ_BUNDLE_VERSION compared with the manifest, and a start refused on a mismatch",
        takers: &[],
        untaken: SAME_VERSION,
    },
    Permit {
        id: "P5.2",
        rule: RuleId::new(5, 3),
        what: "hello's name, version and language, and stderr, as the connector likes",
        takers: &[],
        untaken: "no gate reads them but to show them in the record",
    },
    Permit {
        id: "P8.1",
        rule: RuleId::new(8, 1),
        what: "a cluster session's node connections opened at connect or lazily (the reference)",
        takers: &[Taker::EagerNodeConnections, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P8.2",
        rule: RuleId::new(8, 7),
        what: "after TRYAGAIN or CLUSTERDOWN, the call sent again (paused, bounded) or kind engine",
        takers: &[Taker::RetriesTryagain, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P8.3",
        rule: RuleId::new(8, 11),
        what: "the slot map's refresh left to the client library, if it never re-sends the failed call",
        takers: &[],
        untaken: "the Python connector takes it (redis-py's RedisCluster refreshes its own map, \
                  retries 0) and passes every cluster cell of the matrix",
    },
    Permit {
        id: "P8.4",
        rule: RuleId::new(8, 3),
        what: "a batch over queues split by slot rather than by node",
        takers: &[],
        untaken: "the reference takes it (a batch's lanes are slots, not nodes) and passes every \
                  gate on a cluster",
    },
    Permit {
        id: "P8.5",
        rule: RuleId::new(8, 1),
        what: "no cluster support: a cluster connect answered with kind unsupported",
        takers: &[],
        untaken: "taken by a child fixture in tests/cluster_left_out.rs: its cluster records (plain \
                  and TLS) say cluster not certified with that answer, exit 4, no FAIL, and it \
                  passes G1 on one engine",
    },
    Permit {
        id: "P9.1",
        rule: RuleId::new(9, 1),
        what: "urls beyond what the harness sends (no user, a percent-encoded password, IPv6, a default port), and redis://word@host:port read as a password or as a user",
        takers: &[],
        untaken: NEVER_SENT,
    },
    Permit {
        id: "P9.2",
        rule: RuleId::new(9, 1),
        what: "\"ca_file\": null refused as invalid instead of read as absent",
        takers: &[],
        untaken: NEVER_SENT,
    },
    Permit {
        id: "P10.1",
        rule: RuleId::new(10, 3),
        what: "on a TLS cluster, connect fails with kind engine when a node it reaches at connect presents a refused certificate",
        takers: &[Taker::EagerNodeConnections, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P10.2",
        rule: RuleId::new(10, 1),
        what: "no TLS: every rediss:// connect answered with kind unsupported",
        takers: &[],
        untaken: "taken by a child fixture in tests/tls.rs: its TLS record says TLS not certified \
                  with that answer, exit 4, no FAIL, and it passes G1 without TLS",
    },
    Permit {
        id: "P11.1",
        rule: RuleId::new(11, 4),
        what: "behind Sentinel, SENTINEL sentinels, get-primary-addr-by-name and a subscription to +switch-master on a Sentinel",
        takers: &[Taker::SentinelExtras],
        untaken: "",
    },
    Permit {
        id: "P11.2",
        rule: RuleId::new(11, 1),
        what: "no Sentinel support: a connect that names a Sentinel deployment answered with kind unsupported",
        takers: &[],
        untaken: "taken by a child fixture in tests/sentinel_gate.rs: its Sentinel record says \
                  Sentinel not certified with that answer, no FAIL",
    },
];

/// The permission ids SPEC declares (`**P<n>.<m>**`), in order of first appearance.
pub fn spec_permit_ids(spec: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for part in spec.split("**P").skip(1) {
        if let Some(end) = part.find("**")
            && let Some(id) = ids_in(&format!("P{}", &part[..end])).first()
            && id.len() == end + 1
            && !ids.contains(id)
        {
            ids.push(id.clone());
        }
    }
    ids
}

/// Every `P<n>.<m>` in `text`.
fn ids_in(text: &str) -> Vec<String> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    text.match_indices('P')
        .filter_map(|(i, _)| {
            let rest = &text[i + 1..];
            let a = digits(rest);
            (a > 0 && rest[a..].starts_with('.') && digits(&rest[a + 1..]) > 0)
                .then(|| format!("P{}", &rest[..a + 1 + digits(&rest[a + 1..])]))
        })
        .collect()
}

/// The permissions as text, for `emq-gate rules`.
pub fn text() -> String {
    let mut s = String::from("\npermissions (each double must PASS every gate):\n");
    for p in PERMITS {
        let by = if p.takers.is_empty() {
            format!("no double: {}", p.untaken)
        } else {
            let names: Vec<String> = p.takers.iter().map(|t| format!("{t:?}")).collect();
            names.join(", ")
        };
        s.push_str(&format!("  {} ({}): {}\n    {by}\n", p.id, p.rule, p.what));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_in_order_of_declaration() {
        let spec = "## 1. A\n\n- a connector may send PING (**P1.1**).\n\n**P1.2** Either \
                    way, **P1.1** again; **Pending** is no id.\n";
        assert_eq!(spec_permit_ids(spec), ["P1.1", "P1.2"]);
    }

    #[test]
    fn spec_declares_the_permissions_of_the_table_in_its_order() {
        let table: Vec<&str> = PERMITS.iter().map(|p| p.id).collect();
        assert_eq!(spec_permit_ids(super::super::SPEC), table);
    }

    #[test]
    fn every_permission_is_taken_by_a_double_or_says_why_not() {
        for p in PERMITS {
            assert!(
                p.takers.is_empty() != p.untaken.is_empty(),
                "{}: a double that takes it, or why none does (not both)",
                p.id
            );
        }
        for t in Taker::ALL {
            assert!(
                PERMITS.iter().any(|p| p.takers.contains(&t)),
                "{t:?} takes no permission"
            );
        }
    }
}
