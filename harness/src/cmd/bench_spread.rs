//! `emq-gate bench --engine cluster`: enqueue throughput of one batch spread over 1, 3 and 12
//! queues, on the cluster and on a single node booted from the same `valkey-server` in the same
//! run, as a ratio. `valkey-benchmark` is no reference here: it sends every command of a run to
//! one node, so the single node is.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Serialize;

use crate::cmd::run::{Subject, factory};
use crate::connector::Verbs;
use crate::engine::{Engine, EngineChoice, EngineOptions};
use crate::error::HarnessError;
use crate::protocol::bundle::Bundle;
use crate::protocol::grammar::key;
use crate::report::output::Progress;

/// The queue counts compared.
pub const SPREADS: [usize; 3] = [1, 3, 12];
const DEPTH: i64 = 1000;

/// One queue count, on both engines.
#[derive(Debug, Clone, Serialize)]
pub struct SpreadRow {
    pub queues: usize,
    /// Primaries the queues land on (the cluster).
    pub nodes: usize,
    pub n: i64,
    pub cluster_ops_per_s: f64,
    pub single_ops_per_s: f64,
    /// cluster / single.
    pub ratio: f64,
}

/// The best ops/s of `repeat` timed batches of `n` over `qs` on `engine`.
fn best_ops(
    engine: &Engine,
    bundle: &Arc<Bundle>,
    qs: &[String],
    n: i64,
    repeat: u32,
) -> Result<f64, HarnessError> {
    let make = factory(&Subject::Reference, bundle);
    let mut best: f64 = 0.0;
    for _ in 0..repeat.max(1) {
        let mut admin = engine.prepare_db(0)?;
        let mut c = make.make()?;
        let bad = |e: crate::error::ConnectorError| HarnessError::Engine(format!("spread: {e}"));
        c.connect("b", engine.target(0)).map_err(bad)?;
        c.batch_over("b", qs, DEPTH * qs.len() as i64, DEPTH, "payload")
            .map_err(bad)?;
        admin.flushdb()?;
        let t0 = std::time::Instant::now();
        let done = c.batch_over("b", qs, n, DEPTH, "payload").map_err(bad)?;
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        if done != n {
            return Err(HarnessError::Engine(format!(
                "a batch of {n} over {} queues replied {done}",
                qs.len()
            )));
        }
        best = best.max(n as f64 / secs);
    }
    Ok(best)
}

/// The spread table: `cluster` against a single node booted from `server` now.
pub fn spread(
    cluster: &Engine,
    server: Option<std::path::PathBuf>,
    bundle: &Arc<Bundle>,
    n: i64,
    repeat: u32,
    progress: &Progress,
) -> Result<Vec<SpreadRow>, HarnessError> {
    progress.line("booting a single node for the spread comparison");
    let single = Engine::start(&EngineOptions {
        choice: EngineChoice::Binary,
        valkey_server: server,
        ..EngineOptions::default()
    })?;
    let admin = cluster.admin(0)?;
    let mut rows = Vec::new();
    for count in SPREADS {
        let qs = admin.names_over_primaries("spread", count);
        let nodes: BTreeSet<usize> = qs
            .iter()
            .map(|q| admin.shard_of(&key(q, "pending")))
            .collect();
        let c = best_ops(cluster, bundle, &qs, n, repeat)?;
        let s = best_ops(&single, bundle, &qs, n, repeat)?;
        progress.line(&format!(
            "{count:>2} queues: cluster {c:>9.0} ops/s, single node {s:>9.0} ops/s"
        ));
        rows.push(SpreadRow {
            queues: count,
            nodes: nodes.len(),
            n,
            cluster_ops_per_s: c,
            single_ops_per_s: s,
            ratio: c / s,
        });
    }
    Ok(rows)
}
