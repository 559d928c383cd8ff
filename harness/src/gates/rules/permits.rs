//! The permissions SPEC grants a connector (`**P<section>.<n>**`: a *may*, an *either/or*, a
//! "both are fine", an "allowed"), beside the rules they refine. A rule's ways say how a
//! connector breaks it and which doubles must FAIL; a permission says what a connector may do
//! instead and which double takes that path and must PASS every gate (`crate::doubles::permits`).
//! A check stricter than its rule is invisible to broken doubles: only a connector that takes
//! the permitted path meets it, and that is a false FAIL on a connector that follows SPEC.
//!
//! `tests/rules.rs` keeps this table and SPEC in step: every unit of SPEC whose prose grants
//! something ([`PERMISSION_WORDS`]) declares or cites a `P` id, every id is here, and every
//! entry names a double that takes it or says why no gate can see the difference.

use super::RuleId;
use crate::doubles::permits::Taker;

/// The words that grant a permission in SPEC's prose (outside backticks). SPEC keeps "may" for
/// permissions alone, so a sentence that says one grants something and needs an id.
pub const PERMISSION_WORDS: &[&str] = &["may", "allowed", "fine", "either", "optional"];

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

/// Every permission of SPEC, in SPEC's order.
pub const PERMITS: &[Permit] = &[
    Permit {
        id: "P3.1",
        rule: RuleId::new(3, 5),
        what: "a session reconnects by itself on its next verb (the fence read before the first script) or fails the verb with kind engine; a read verb may come first on the new connection",
        takers: &[Taker::ReconnectReadsFirst, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.1",
        rule: RuleId::new(4, 11),
        what: "how a pipeline's bytes are cut into writes (one write, or one per command)",
        takers: &[Taker::WritePerCommand, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.2",
        rule: RuleId::new(4, 13),
        what: "browse's payloads by HGET per id or by HMGET",
        takers: &[Taker::HmgetPayloads, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.3",
        rule: RuleId::new(4, 19),
        what: "AUTH user password, or HELLO 3 AUTH user password (RESP2 or RESP3)",
        takers: &[Taker::Resp3Hello, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P4.4",
        rule: RuleId::new(4, 19),
        what: "PING, CLIENT SETNAME, CLIENT SETINFO and DISCARD on any connection, at any time",
        takers: &[
            Taker::GreetsEachConnection,
            Taker::PingsEveryVerb,
            Taker::Permissive,
        ],
        untaken: "",
    },
    Permit {
        id: "P4.5",
        rule: RuleId::new(4, 18),
        what: "a read timeout anywhere from 3 s to 60 s; after one, drop the connection, or read and discard the late reply",
        takers: &[Taker::ShortestReadTimeout, Taker::Permissive],
        untaken: "",
    },
    Permit {
        id: "P5.1",
        rule: RuleId::new(4, 1),
        what: "1.0 and 1e3 read as the integers 1 and 1000, or refused as invalid",
        takers: &[],
        untaken: NEVER_SENT,
    },
    Permit {
        id: "P8.1",
        rule: RuleId::new(8, 1),
        what: "a cluster session's node connections opened at connect or lazily",
        takers: &[Taker::EagerNodeConnections, Taker::Permissive],
        untaken: "",
    },
];

/// The units of SPEC that grant something ([`PERMISSION_WORDS`]) and neither declare nor cite a
/// `P<n>.<m>`.
pub fn permissions_without_id(spec: &str) -> Vec<String> {
    super::prose_units(spec)
        .into_iter()
        .filter(|u| super::says_any(u, PERMISSION_WORDS) && ids_in(u).is_empty())
        .collect()
}

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
    fn a_unit_that_grants_needs_an_id_and_ids_are_read_in_order() {
        let spec = "## 1. A\n\n- a connector may send PING (**P1.1**).\n- the reply may be \
                    late.\n- `may` in code grants nothing.\n\nBoth are fine: see P1.1.\n\n\
                    **P1.2** Either way, **P1.1** again.\n";
        let loose = permissions_without_id(spec);
        assert_eq!(loose, ["- the reply may be late."]);
        assert_eq!(spec_permit_ids(spec), ["P1.1", "P1.2"]);
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
