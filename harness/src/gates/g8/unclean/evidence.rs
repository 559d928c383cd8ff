//! The evidence lines of an unclean failover's accounting ([`super::attribution::Verdict`]).

use super::attribution::{Anomaly, Verdict};
use crate::engine::nodes::TakeOver;
use crate::gates::GateOutcome;

/// How many anomalies of one side are named in full (the rest are counted).
const NAMED: usize = 5;

fn named(a: &[Anomaly]) -> String {
    let mut s: Vec<String> = a
        .iter()
        .take(NAMED)
        .map(|a| format!("{} {}: {}", a.kind, a.subject, a.calls.join("; ")))
        .collect();
    if a.len() > NAMED {
        s.push(format!("and {} more", a.len() - NAMED));
    }
    s.join(" | ")
}

/// Records the verdict: a held line for the accounting and the engine's losses, a FAIL with the
/// job's calls for each anomaly that is the connector's.
pub fn record(out: &mut GateOutcome, tag: &str, v: &Verdict, bound_ms: u64, took: &TakeOver) {
    // The held lines are the same on every run (a record's evidence is compared by `check`);
    // the counts (the caller's `unclean_<tag>_*` figures) and what the engine lost, and why,
    // vary with the machine: figures.
    out.pass(format!(
        "{tag}: every acknowledged job of the crew accounted for (the counts: figures unclean_{tag}_jobs_acked, _engine_lost, _connector_anomalies, _recovered)"
    ));
    if !v.engine.is_empty() {
        let (a, b) = v.window_from_fault_ms.unwrap_or_default();
        out.figure(
            &format!("unclean_{tag}_engine_loss"),
            format!(
                "the engine lost {} acknowledged jobs in its asynchronous replication window \
                 (the promoted replica took over the old primary's history {} up to offset {}; {} bytes \
                 beyond it were acknowledged and never reached it; acknowledged from {a} ms to {b} ms \
                 after the fault): counted as the engine's, not the connector's: {}",
                v.engine.len(),
                took.replid2.get(..8).unwrap_or(&took.replid2),
                took.second_repl_offset.saturating_sub(1),
                v.window_bytes,
                named(&v.engine)
            ),
        );
    }
    out.pass(format!(
        "{tag}: what the engine lost in its asynchronous replication window, beyond the offset the promoted replica took over, is counted as the engine's, never the connector's (figures unclean_{tag}_engine_lost and unclean_{tag}_engine_loss: which jobs, and why)"
    ));
    let progress: Vec<&Anomaly> = v
        .connector
        .iter()
        .filter(|a| a.kind == "no progress")
        .collect();
    let jobs: Vec<Anomaly> = v
        .connector
        .iter()
        .filter(|a| a.kind != "no progress")
        .cloned()
        .collect();
    if jobs.is_empty() {
        out.pass(format!(
            "{tag}: no acknowledged job lost that the promoted replica had, none completed twice, none enqueued twice, none unexpected"
        ));
    } else {
        out.fail(format!(
            "{tag}: {} jobs the connector lost, duplicated or made up (the engine had them): {}",
            jobs.len(),
            named(&jobs)
        ));
    }
    if progress.is_empty() {
        out.pass(format!(
            "{tag}: every worker claimed on the failed-over shard again within the bound after the new primary's announcement (twice the failover, plus twenty of the crew's slowest calls: the figure unclean_{tag}_progress_bound_ms)"
        ));
    } else {
        let owned: Vec<Anomaly> = progress.into_iter().cloned().collect();
        out.fail(format!(
            "{tag}: a worker made no progress: no claim on the failed-over shard within {bound_ms} ms of the new primary's announcement: {}",
            named(&owned)
        ));
    }
}
