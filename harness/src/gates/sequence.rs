//! The gates of one lane (`gates/lanes.rs`), in the record's order, with the parts a gate left
//! (`gates/beside.rs`) going on beside later gates of the lane: issue #43's waits that overlap,
//! across gates. A left part only waits (G1's held reply, R5.13), on a database of its own; it may
//! run beside the gates that judge nothing engine-wide ([`Gate::alone`] is false), and it starts
//! at the first gate of the longest stretch of them that follows its own gate ([`start_at`]), so
//! it has the most work beside it. Before a gate that must run alone, every started part is
//! waited for. The record is the same as in line: the part's evidence goes where it stood in its
//! gate ([`GateOutcome::absorb`]), and its gate's verdict lands (is said, `landed`) when it ends.

use std::thread::ScopedJoinHandle;

use super::beside::{self, Left, Ran};
use super::{ALL, Gate, GateContext, GateId, GateOutcome, Verdict, run_gate, run_gate_leaving};

/// Where a part left before gate `from` starts: the first gate of the longest stretch of
/// selected gates that need not run alone, from `from` on (the first such stretch on a tie);
/// `None` when no such gate is left. Unselected gates do not run: they neither break a stretch
/// nor count in it. Pure.
pub fn start_at(alone: &[bool], selected: &[bool], from: usize) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    let mut current: Option<(usize, usize)> = None;
    for i in from..alone.len() {
        if !selected[i] {
            continue;
        }
        if alone[i] {
            current = None;
            continue;
        }
        let (start, len) = current.map_or((i, 1), |(s, l)| (s, l + 1));
        current = Some((start, len));
        if best.is_none_or(|(_, l)| len > l) {
            best = current;
        }
    }
    best.map(|(start, _)| start)
}

/// A part waiting for its gate, or started.
struct Pending {
    /// Its gate's index in the lane (and in the outcomes).
    gate: usize,
    left: Left,
    start: Option<usize>,
}

/// Runs the gates of `lane` (in `ALL`'s order, `gates/lanes.rs`) and returns their outcomes in
/// that order; `landed` is told each gate's outcome once it is whole (a gate whose part goes on
/// beside later gates lands when the part ends). Gates outside `only`, and after a `fail_fast`
/// stop, are NOT RUN. Under `fail_fast` no part is left: each gate is whole before the next one
/// decides whether to run.
pub fn run_all(
    ctx: &GateContext<'_>,
    lane: &[GateId],
    only: Option<&[GateId]>,
    fail_fast: bool,
    landed: &mut dyn FnMut(&GateOutcome),
) -> Vec<GateOutcome> {
    let gates: Vec<&Gate> = ALL.iter().filter(|g| lane.contains(&g.id)).collect();
    let selected: Vec<bool> = gates
        .iter()
        .map(|g| only.is_none_or(|o| o.contains(&g.id)))
        .collect();
    let alone: Vec<bool> = gates.iter().map(|g| g.alone).collect();
    std::thread::scope(|scope| {
        let mut outcomes: Vec<GateOutcome> = Vec::new();
        let mut pending: Vec<Pending> = Vec::new();
        let mut started: Vec<(Pending, ScopedJoinHandle<'_, Ran>)> = Vec::new();
        let mut stopped = false;
        for (i, gate) in gates.iter().copied().enumerate() {
            let runs = selected[i] && !stopped;
            if runs && gate.alone {
                for (p, handle) in started.drain(..) {
                    finish(ctx, &mut outcomes[p.gate], p.left, handle.join(), landed);
                }
            }
            if runs {
                let (now, later): (Vec<_>, Vec<_>) =
                    pending.drain(..).partition(|p| p.start == Some(i));
                pending = later;
                for p in now {
                    let handle = beside::spawn(scope, ctx, gates[p.gate].id, p.left.part);
                    started.push((p, handle));
                }
            }
            let mut outcome = run_one(gate, ctx, runs, selected[i], fail_fast);
            stopped |= runs && fail_fast && outcome.verdict != Verdict::Pass;
            match outcome.left.take() {
                Some(left) => {
                    let start = start_at(&alone, &selected, i + 1);
                    (ctx.progress)(&format!(
                        "{}: its part that waits goes on beside {}",
                        gate.id,
                        start.map_or("nothing (no gate after it may share the engine)", |s| {
                            gates[s].id.as_str()
                        })
                    ));
                    pending.push(Pending {
                        gate: i,
                        left,
                        start,
                    });
                }
                None => landed(&outcome),
            }
            outcomes.push(outcome);
        }
        for p in pending {
            let handle = beside::spawn(scope, ctx, gates[p.gate].id, p.left.part);
            started.push((p, handle));
        }
        for (p, handle) in started {
            finish(ctx, &mut outcomes[p.gate], p.left, handle.join(), landed);
        }
        outcomes
    })
}

/// One gate of the run: run (leaving its part, unless `fail_fast`), or NOT RUN saying why.
fn run_one(
    gate: &Gate,
    ctx: &GateContext<'_>,
    runs: bool,
    selected: bool,
    fail_fast: bool,
) -> GateOutcome {
    if runs {
        (ctx.progress)(&format!("{} {} ...", gate.id, gate.name));
        return if fail_fast {
            run_gate(gate, ctx)
        } else {
            run_gate_leaving(gate, ctx)
        };
    }
    GateOutcome::not_run(
        gate.id,
        gate.name,
        if selected {
            "not run: an earlier gate did not pass (--fail-fast)"
        } else {
            "not selected in this run (--gates, or --rerun-failed)"
        },
    )
}

/// A left part ended: its evidence into its gate's outcome, and the gate lands.
fn finish(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    left: Left,
    ran: std::thread::Result<Ran>,
    landed: &mut dyn FnMut(&GateOutcome),
) {
    beside::take_in(ctx, out, left.at, ran, true);
    landed(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_SELECTED: [bool; 8] = [true; 8];

    fn alone_of_all() -> Vec<bool> {
        ALL.iter().map(|g| g.alone).collect()
    }

    #[test]
    fn g1s_part_starts_at_g6_the_longest_stretch_that_shares_the_engine() {
        assert_eq!(
            start_at(&alone_of_all(), &ALL_SELECTED, 1),
            Some(5),
            "G6 and G7, between G5 and G8"
        );
    }

    #[test]
    fn in_g1s_lane_its_part_starts_at_g7() {
        assert_eq!(start_at(&[false, false], &[true, true], 1), Some(1));
    }

    #[test]
    fn a_part_starts_where_the_selected_gates_let_it_or_nowhere() {
        let alone = alone_of_all();
        // G1 and G4 only: G4.
        let mut sel = [false; 8];
        sel[0] = true;
        sel[3] = true;
        assert_eq!(start_at(&alone, &sel, 1), Some(3));
        // G1 and G2 only: no gate may share the engine with it.
        let mut sel = [false; 8];
        sel[0] = true;
        sel[1] = true;
        assert_eq!(start_at(&alone, &sel, 1), None);
        // A tie goes to the first stretch; an unselected gate does not break one.
        assert_eq!(
            start_at(&[false, true, false, true, false], &[true; 5], 1),
            Some(2)
        );
        assert_eq!(
            start_at(
                &[false, false, true, false, false],
                &[true, true, false, true, true],
                1
            ),
            Some(1)
        );
    }
}
