//! The second shrinking stage: after proptest has shrunk a disagreeing history, calls, sessions
//! and queues are deleted greedily while the history still disagrees.

use crate::engine::Admin;
use crate::suites::model::history::{History, TimeScale};
use crate::suites::model::judge::{Breach, Env, run_history_at};

/// A second shrinking stage after proptest's: proptest deletes each call once and then simplifies
/// calls, but a simplification (a claim turned into an enqueue) can make an earlier deletion
/// possible. This pass deletes calls, sessions and queues greedily until nothing more can go and
/// the history still disagrees. Returns the history, its message, and the runs and calls it cost.
pub fn minimize(
    env: &Env<'_>,
    admin: &mut Admin,
    mut h: History,
    mut message: String,
    scale: TimeScale,
    more_time: impl Fn() -> bool,
) -> (History, String, u64, u64) {
    let (mut runs, mut calls) = (0u64, 0u64);
    let mut still_fails = |cand: &History, message: &mut String| -> Option<bool> {
        runs += 1;
        calls += cand.calls.len() as u64;
        match run_history_at(env, admin, cand, scale) {
            Ok(_) => Some(false),
            Err(Breach::Mismatch(m)) => {
                *message = m;
                Some(true)
            }
            Err(Breach::Harness(_) | Breach::Void { .. }) => None,
        }
    };
    // Confirm on a fresh connector first: a drawn history ran on one reused across histories.
    match still_fails(&h, &mut message) {
        Some(true) | None => {}
        Some(false) => {
            message = format!(
                "{message} (only on a connector reused from earlier histories, whose sessions were \
                 disconnected: a fresh connector agrees, so state leaked between histories)"
            );
            return (h, message, runs, calls);
        }
    }
    // `cand` in place of `h` if it still fails: whether it did; `None`, stop shrinking.
    let mut take = |h: &mut History, cand: History, message: &mut String| {
        let fails = still_fails(&cand, message)?;
        if fails {
            *h = cand;
        }
        Some(fails)
    };
    'outer: loop {
        let mut changed = false;
        let mut i = h.calls.len();
        while i > 0 {
            i -= 1;
            if h.calls.len() <= 1 || !more_time() {
                break 'outer;
            }
            let mut cand = h.clone();
            cand.calls.remove(i);
            match take(&mut h, cand, &mut message) {
                Some(taken) => changed |= taken,
                None => break 'outer,
            }
        }
        for shrink in [0, 1] {
            let mut cand = h.clone();
            let n = if shrink == 0 {
                &mut cand.sessions
            } else {
                &mut cand.queues
            };
            if *n <= 1 || !more_time() {
                continue;
            }
            *n -= 1;
            match take(&mut h, cand, &mut message) {
                Some(taken) => changed |= taken,
                None => break 'outer,
            }
        }
        if !changed {
            break;
        }
    }
    (h, message, runs, calls)
}
