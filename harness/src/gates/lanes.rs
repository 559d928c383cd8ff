//! The lanes of a run (issue #43): groups of gates that each run on an engine of their own, all
//! lanes at once. Inside a lane the gates run in order as before (`gates/sequence.rs`); across
//! lanes nothing is shared, not even the engine, so a gate that judges what the whole engine holds
//! (the command counters, the script cache, the ACL log) judges only its own lane's traffic, and
//! the record is the one the gates would write one after another. What a run saves is waiting:
//! G8's crashes and failovers, G5's held windows and G7's soak wait side by side.
//!
//! Every gate starts on a freshly booted engine or after gates of its own lane only; none reads
//! what another gate left (each flushes its own database first), so a lane's order is the
//! record's order restricted to it. G1 leads a lane whose later gate (G7) shares the engine with
//! its waiting part (`sequence::start_at`). Pure: unit-tested without an engine.

use super::GateId;
use crate::engine::EngineKind;

/// The lanes on an engine that boots in well under a second (one node, plaintext or TLS): G8
/// alone, G1 with G7 (its held reply waits beside G7's soak), and the rest, about as long as
/// either (the reference: G1 + G7 5 s, G2–G6 6 s, G8 3.5 s).
const ONE_NODE: &[&[GateId]] = &[
    &[GateId::G1, GateId::G7],
    &[GateId::G2, GateId::G3, GateId::G4, GateId::G5, GateId::G6],
    &[GateId::G8],
];

/// The lanes on a cluster or behind Sentinel, whose boot costs seconds of both cores: G8 (the
/// longest gate there, its failovers) beside all the others.
const MANY_NODES: &[&[GateId]] = &[
    &[
        GateId::G1,
        GateId::G2,
        GateId::G3,
        GateId::G4,
        GateId::G5,
        GateId::G6,
        GateId::G7,
    ],
    &[GateId::G8],
];

/// Every gate, in the record's order: the one lane of a run that cannot or must not have more.
pub fn every_gate() -> Vec<GateId> {
    super::ALL.iter().map(|g| g.id).collect()
}

/// The lanes of a run on an engine of `kind`, each in the record's order, keeping only the lanes
/// that hold a selected gate (`only`: `None` is all of them). One lane where a second engine
/// cannot be had (`--url`: the user's engine) or must not be (`fail_fast`: each gate is whole
/// before the next decides whether to run; `sequential`: asked for). Every gate is in exactly one
/// lane, so the lanes together hold the eight.
pub fn plan(
    kind: EngineKind,
    only: Option<&[GateId]>,
    fail_fast: bool,
    sequential: bool,
) -> Vec<Vec<GateId>> {
    let table: Vec<Vec<GateId>> = match kind {
        _ if fail_fast || sequential => vec![every_gate()],
        EngineKind::Url => vec![every_gate()],
        EngineKind::Container | EngineKind::Binary => ONE_NODE.iter().map(|l| l.to_vec()).collect(),
        EngineKind::Cluster | EngineKind::Sentinel => {
            MANY_NODES.iter().map(|l| l.to_vec()).collect()
        }
    };
    let wanted = |g: &GateId| only.is_none_or(|o| o.contains(g));
    let mut lanes: Vec<Vec<GateId>> = table
        .iter()
        .filter(|lane| lane.iter().any(wanted))
        .cloned()
        .collect();
    if lanes.is_empty() {
        // Nothing selected: the first lane still reports every gate as not run.
        lanes.push(table[0].clone());
    }
    // The gates of no kept lane are reported by the first one (as not selected).
    let kept: Vec<GateId> = lanes.iter().flatten().copied().collect();
    let rest: Vec<GateId> = every_gate()
        .into_iter()
        .filter(|g| !kept.contains(g))
        .collect();
    lanes[0].extend(rest);
    lanes[0].sort();
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_once(lanes: &[Vec<GateId>]) -> bool {
        let mut seen: Vec<GateId> = lanes.iter().flatten().copied().collect();
        seen.sort();
        seen == every_gate()
    }

    #[test]
    fn every_gate_is_in_exactly_one_lane_on_every_engine() {
        for kind in [
            EngineKind::Container,
            EngineKind::Binary,
            EngineKind::Url,
            EngineKind::Cluster,
            EngineKind::Sentinel,
        ] {
            for fail_fast in [false, true] {
                let lanes = plan(kind, None, fail_fast, false);
                assert!(all_once(&lanes), "{kind:?}: {lanes:?}");
                for lane in &lanes {
                    assert!(
                        lane.windows(2).all(|w| w[0] < w[1]),
                        "record order: {lane:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_lane_per_engine_only_where_one_can_be_had() {
        assert_eq!(plan(EngineKind::Container, None, false, false).len(), 3);
        assert_eq!(plan(EngineKind::Binary, None, false, false).len(), 3);
        assert_eq!(plan(EngineKind::Cluster, None, false, false).len(), 2);
        assert_eq!(plan(EngineKind::Sentinel, None, false, false).len(), 2);
        assert_eq!(plan(EngineKind::Url, None, false, false).len(), 1);
        assert_eq!(plan(EngineKind::Binary, None, true, false).len(), 1);
        assert_eq!(plan(EngineKind::Binary, None, false, true).len(), 1);
    }

    #[test]
    fn g1_leads_the_lane_its_waiting_part_shares() {
        let lanes = plan(EngineKind::Binary, None, false, false);
        assert_eq!(lanes[0], vec![GateId::G1, GateId::G7]);
    }

    #[test]
    fn a_lane_without_a_selected_gate_boots_nothing() {
        let only = [GateId::G3];
        let lanes = plan(EngineKind::Binary, Some(&only), false, false);
        assert_eq!(lanes.len(), 1, "{lanes:?}");
        assert!(lanes[0].contains(&GateId::G3));
        assert!(
            all_once(&lanes),
            "the others are reported, not run: {lanes:?}"
        );
        let only = [GateId::G5, GateId::G8];
        let lanes = plan(EngineKind::Binary, Some(&only), false, false);
        assert_eq!(lanes.len(), 2, "{lanes:?}");
        assert!(all_once(&lanes));
        let none: [GateId; 0] = [];
        assert!(all_once(&plan(
            EngineKind::Binary,
            Some(&none),
            false,
            false
        )));
    }
}
