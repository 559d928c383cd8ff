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
pub fn record(
    out: &mut GateOutcome,
    tag: &str,
    v: &Verdict,
    calls: usize,
    bound_ms: u64,
    took: &TakeOver,
) {
    out.pass(format!(
        "{tag}: {} acknowledged jobs of the crew ({calls} calls) accounted for; {} lost by the engine, {} anomalies the connector's, {} failed enqueues recovered, {} jobs gone after a complete that failed (it may have run)",
        v.acked,
        v.engine.len(),
        v.connector.len(),
        v.recovered,
        v.completed_unacknowledged
    ));
    if !v.engine.is_empty() {
        let (a, b) = v.window_from_fault_ms.unwrap_or_default();
        out.pass(format!(
            "{tag}: the engine lost {} acknowledged jobs in its asynchronous replication window \
             (the promoted replica took over the old primary's history {} up to offset {}; {} bytes \
             beyond it were acknowledged and never reached it; acknowledged from {a} ms to {b} ms \
             after the fault): counted as the engine's, not the connector's: {}",
            v.engine.len(),
            took.replid2.get(..8).unwrap_or(&took.replid2),
            took.second_repl_offset.saturating_sub(1),
            v.window_bytes,
            named(&v.engine)
        ));
    }
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
            "{tag}: every worker claimed on the failed-over shard again within {bound_ms} ms of the new primary's announcement (the bound: twice the failover, plus twenty of the crew's slowest calls)"
        ));
    } else {
        let owned: Vec<Anomaly> = progress.into_iter().cloned().collect();
        out.fail(format!(
            "{tag}: a worker made no progress: no claim on the failed-over shard within {bound_ms} ms of the new primary's announcement: {}",
            named(&owned)
        ));
    }
}
