//! G7 — interleavings: property-based histories of all eight verbs over several sessions and
//! queues agree with the pure model (`crate::suites::model`), reply by reply and in the final keyspace; a
//! failure is shrunk and printed as a ready-to-commit YAML case. Beside it, a concurrent soak of
//! real worker threads must account for every job exactly.

use std::time::Duration;

use crate::gates::{GateContext, GateError, GateId, GateOutcome};
use crate::suites::model::history::History;
use crate::suites::model::runner::{self, Env, Failure, Options, Report, parse_regressions};
use crate::suites::model::soak::{SoakOptions, soak};

/// Committed histories replayed before any drawn one (one JSON history per line).
pub const REGRESSIONS: &str = include_str!("../../tests/interleavings-regressions.txt");

/// The env var naming a directory a counterexample case is written to.
pub const CASE_OUT_ENV: &str = crate::settings::G7_CASE_OUT;

/// The figure naming the file a failure's original history is kept in.
pub const HISTORY_FILE: &str = "failure_history_file";

/// Shrinking is bounded in time and steps.
pub const MAX_SHRINK_TIME: Duration = Duration::from_secs(60);
pub const MAX_SHRINK_ITERS: u32 = 2048;

/// The soak's width and length in the gate.
pub const SOAK_WORKERS: usize = 4;
pub const SOAK_TIME: Duration = Duration::from_secs(2);

/// The committed regressions, parsed.
pub fn regressions() -> Vec<History> {
    parse_regressions(REGRESSIONS).expect("the committed G7 regressions parse")
}

/// The history `EMQ_G7_REPLAY` names, when set.
fn replayed() -> Result<Option<History>, crate::error::HarnessError> {
    crate::settings::var_os(crate::settings::G7_REPLAY)
        .map(|p| replay_file(std::path::Path::new(&p)))
        .transpose()
}

/// A history file: one [`keep`] wrote (its `history`, the original that failed), or one history
/// as JSON.
pub fn replay_file(path: &std::path::Path) -> Result<History, crate::error::HarnessError> {
    let bad = |e: String| {
        crate::error::HarnessError::BadInput(format!(
            "{} {}: {e}",
            crate::settings::G7_REPLAY,
            path.display()
        ))
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let h = v.get("history").cloned().unwrap_or(v);
    serde_json::from_value(h).map_err(|e| bad(format!("not a G7 history: {e}")))
}

/// Draws and judges `ctx.histories` histories (after the regressions, and before them the
/// history `EMQ_G7_REPLAY` names).
pub fn histories(ctx: &GateContext<'_>) -> Result<Report, crate::error::HarnessError> {
    let mut regressions = regressions();
    if let Some(h) = replayed()? {
        (ctx.progress)(&format!(
            "G7: replaying the history in ${} first",
            crate::settings::G7_REPLAY
        ));
        regressions.insert(0, h);
    }
    let env = Env {
        engine: ctx.engine,
        factory: ctx.factory,
        db: ctx.db_of(GateId::G7),
    };
    runner::run(
        &env,
        &Options {
            histories: ctx.histories,
            seed: ctx.seed,
            max_shrink_time: MAX_SHRINK_TIME,
            max_shrink_iters: MAX_SHRINK_ITERS,
            regressions,
        },
    )
}

/// The gate's check.
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    out.figure("seed", ctx.seed);
    (ctx.progress)(&format!(
        "G7: {} histories (seed {}), then a {} s soak",
        ctx.histories,
        ctx.seed,
        SOAK_TIME.as_secs()
    ));
    let report = histories(ctx)
        .map_err(|e| GateError::instrument(format!("histories could not run: {e}")))?;
    out.figure("histories_run", report.runs);
    out.figure("calls", report.calls);
    out.figure("histories_per_s", round(report.histories_per_s()));
    out.figure("calls_per_s", round(report.calls_per_s()));
    out.figure("widest_bracket_ms", report.clock.widest_bracket_ms);
    out.figure("void_reruns", report.clock.void_reruns);
    out.figure("time_scale", report.clock.scale.get());
    let n_reg = regressions().len();
    if ctx.engine.is_cluster() {
        cluster_spread(ctx, out);
    }
    match &report.failure {
        None => {
            out.pass(format!(
                "{n_reg} committed regression histories and {} drawn histories (1-80 calls of all eight \
                 verbs over 1-4 sessions and 1-3 queues) agreed with the model, reply by reply and in \
                 the final keyspace",
                ctx.histories
            ));
        }
        Some(f) => judge_failure(ctx, out, f),
    }
    soak_phase(ctx, out)
}

/// On a cluster: the histories' three queues are spread over the primaries.
fn cluster_spread(ctx: &GateContext<'_>, out: &mut GateOutcome) {
    match ctx.engine.admin(0) {
        Ok(admin) => {
            let shards: std::collections::BTreeSet<usize> = crate::suites::model::history::QUEUES
                .iter()
                .map(|q| admin.shard_of(q))
                .collect();
            let primaries = admin.primaries().len();
            out.check(
                shards.len() == primaries.min(3),
                format!(
                    "on a cluster the histories' three queues live on {} of the {primaries} primaries",
                    shards.len()
                ),
            );
        }
        Err(e) => out.error(format!("the cluster's slot map could not be read: {e}")),
    }
}

/// The soak: real worker threads, every job accounted for.
fn soak_phase(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let env = Env {
        engine: ctx.engine,
        factory: ctx.factory,
        db: ctx.db_of(GateId::G7),
    };
    let opts = SoakOptions {
        workers: SOAK_WORKERS,
        duration: SOAK_TIME,
        seed: ctx.seed,
    };
    let s = soak(&env, &opts)
        .map_err(|e| GateError::instrument(format!("the soak could not run: {e}")))?;
    out.figure("soak_jobs", s.jobs);
    out.figure("soak_calls", s.calls);
    out.figure("soak_claims", s.claims);
    out.figure("soak_completed", s.completed);
    out.figure(
        "soak_calls_per_s",
        round(s.calls as f64 / s.elapsed.as_secs_f64().max(1e-9)),
    );
    if s.jobs == 0 || s.completed == 0 {
        out.fail("soak: no job was enqueued and completed, so nothing could be accounted");
    } else if s.violations.is_empty() {
        out.pass(format!(
            "soak: {SOAK_WORKERS} workers, a producer and a reaper for {} s; every enqueued job \
             was completed exactly once or sits in exactly one set, no lease was granted twice, \
             every hash's attempts equals the claims granted",
            SOAK_TIME.as_secs()
        ));
    } else {
        let shown: Vec<&String> = s.violations.iter().take(10).collect();
        out.fail(format!(
            "soak: the accounting failed ({} violations), first: {shown:?}",
            s.violations.len()
        ));
    }
    Ok(())
}

/// Where a failure's whole original history is kept: `$EMQ_G7_CASE_OUT`, else a directory under
/// the system's temp dir that outlives the run (the run's own temp dir does not).
fn failure_dir() -> std::path::PathBuf {
    crate::settings::var_os(CASE_OUT_ENV).map_or_else(
        || std::env::temp_dir().join("emq-gate-g7"),
        std::path::PathBuf::from,
    )
}

/// Writes the failure's case and its original history; the history file's path, or why not.
fn keep(f: &Failure) -> Result<std::path::PathBuf, String> {
    let dir = failure_dir();
    let history = dir.join(format!("{}.history.json", f.case_id));
    let body = serde_json::json!({
        "case_id": f.case_id,
        "message": f.original_message,
        "replays_passed": f.replays.0,
        "replays": f.replays.1,
        "history": f.original,
        "shrunk": f.history,
        "shrunk_message": f.message,
    });
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join(format!("{}.yaml", f.case_id)), &f.yaml))
        .and_then(|()| {
            std::fs::write(
                &history,
                serde_json::to_string_pretty(&body).expect("JSON values serialize"),
            )
        })
        .map_err(|e| format!("cannot write {}: {e}", history.display()))?;
    Ok(history)
}

/// Records a disagreement: the shrunk history and its case, whether the original reproduced on
/// replay, and where the original history is kept (the JSON record holds it too).
fn judge_failure(ctx: &GateContext<'_>, out: &mut GateOutcome, f: &Failure) {
    // The history a reproduce line replays runs as the first regression: say it is that one.
    let origin = if f.regression && replayed().ok().flatten().as_ref() == Some(&f.original) {
        "the replayed history (EMQ_G7_REPLAY) of"
    } else if f.regression {
        "a committed regression history"
    } else {
        "a drawn history, shrunk to"
    };
    let (passed, replayed) = f.replays;
    let reproduced = if passed == 0 {
        format!("it failed again on each of {replayed} replays")
    } else {
        format!(
            "did not reproduce on replay: {passed} of {replayed} replays of the original {}-step history passed (a failure that depends on timing or load)",
            f.original.calls.len()
        )
    };
    let kept = match keep(f) {
        Ok(p) => {
            // The reproduce line (`cmd::reproduce`) replays this file.
            out.figure(HISTORY_FILE, p.display().to_string());
            format!("the original history is kept in {}", p.display())
        }
        Err(e) => e,
    };
    out.fail(format!(
        "{origin} {} steps disagreed with the model: {}; {reproduced}; {kept}",
        f.history.calls.len(),
        f.message
    ));
    out.figure("failure_replays_passed", passed);
    out.figure("failure_replays", replayed);
    out.figure(
        "failure_original_history",
        serde_json::to_value(&f.original).expect("histories serialize"),
    );
    out.figure("failure_original_message", f.original_message.clone());
    out.pass(format!("counterexample case {}:\n{}", f.case_id, f.yaml));
    (ctx.progress)(&format!("G7: {kept}"));
    (ctx.progress)(&format!("G7 counterexample:\n{}", f.yaml));
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept history file, as `keep` writes it, is what `EMQ_G7_REPLAY` replays; so is a bare
    /// history; anything else names the variable and the file.
    #[test]
    fn a_kept_history_file_replays() {
        let h = regressions()
            .into_iter()
            .next()
            .expect("a committed regression");
        let t = tempfile::tempdir().unwrap();
        let kept = t.path().join("g7-1.history.json");
        let body = serde_json::json!({"case_id": "g7-1", "history": h, "shrunk": h});
        std::fs::write(&kept, body.to_string()).unwrap();
        let back = replay_file(&kept).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&h).unwrap()
        );
        let bare = t.path().join("bare.json");
        std::fs::write(&bare, serde_json::to_string(&h).unwrap()).unwrap();
        assert!(replay_file(&bare).is_ok());
        std::fs::write(&bare, "{\"history\": 3}").unwrap();
        let e = replay_file(&bare).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "bad input: EMQ_G7_REPLAY {}: not a G7 history",
                bare.display()
            )),
            "{e}"
        );
    }
}
