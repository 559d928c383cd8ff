//! `emq-gate run --rerun-failed RECORD`: only the gates a record did not pass, judged again as
//! the record was (its seed, histories, batch and engine), so an author fixing one failure in CI
//! waits for that gate, not for all eight.

use std::path::Path;

use crate::cmd::run::RunOptions;
use crate::engine::EngineChoice;
use crate::engine::named::EngineName;
use crate::error::HarnessError;
use crate::gates::{GateId, Verdict};
use crate::report::Record;

/// The gates `r` did not pass, in gate order: FAIL, ERROR, and any gate the record lacks. A gate
/// the record left out (NOT RUN) is none of them: it did not fail, and rerunning "what failed"
/// does not widen a partial run.
pub fn not_passed(r: &Record) -> Vec<GateId> {
    crate::gates::ALL
        .iter()
        .map(|g| g.id)
        .filter(|id| {
            !r.gates
                .iter()
                .any(|g| g.id == *id && matches!(g.verdict, Verdict::Pass | Verdict::NotRun))
        })
        .collect()
}

/// What a rerun judges: the options, the gates, and the record it reruns.
#[derive(Debug)]
pub struct Rerun {
    pub options: RunOptions,
    pub gates: Vec<GateId>,
    pub record: Record,
}

/// `opts` narrowed to what `path`'s record did not pass, with the record's seed, histories and
/// batch, and its engine by name unless `own_engine` (the user named one with `--engine-name`).
/// `None` when the record passed every gate: there is nothing to rerun.
pub fn prepare(
    path: &Path,
    opts: RunOptions,
    own_engine: bool,
) -> Result<Option<Rerun>, HarnessError> {
    let record = Record::load(path)?;
    let gates = not_passed(&record);
    if gates.is_empty() {
        return Ok(None);
    }
    let mut options = opts;
    options.seed = record.header.seed;
    options.histories = record.header.histories;
    options.batch = record.header.batch;
    options.only = Some(gates.clone());
    if !own_engine {
        engine_of(&record, &mut options, path)?;
    }
    Ok(Some(Rerun {
        options,
        gates,
        record,
    }))
}

/// The record's engine, by name (`EMQ_ENGINE_<NAME>_SERVER` / `_IMAGE`, as `--engine-name`
/// reads them), booted as it was (binary, container or cluster). A url engine stays the url the
/// user gave: a record does not keep a password.
fn engine_of(r: &Record, options: &mut RunOptions, path: &Path) -> Result<(), HarnessError> {
    let kind = match r.header.engine_kind.as_str() {
        "binary" => EngineChoice::Binary,
        "container" => EngineChoice::Container,
        "cluster" => EngineChoice::Cluster,
        _ => return Ok(()),
    };
    let name = engine(&r.header);
    let named = EngineName::resolve(&name).map_err(|e| {
        HarnessError::BadInput(format!(
            "{} was judged on {name} ({}): {e}; or name another engine with --engine-name",
            path.display(),
            r.header.engine_kind
        ))
    })?;
    let allow_flush = options.engine.allow_flush;
    options.engine = crate::cmd::matrix::engine_options(&named, kind);
    options.engine.allow_flush = allow_flush;
    Ok(())
}

/// The engine a record was judged on, by name: `valkey-9.1`, `valkey-9.1-cluster`.
fn engine(h: &crate::report::Header) -> String {
    h.engine_column()
}

/// The rerun's one verdict: that of the gates it reran (the others are NOT RUN, and a gate
/// not run is no failure of this run, nor an error).
pub fn verdict(fresh: &Record, gates: &[GateId]) -> Verdict {
    Verdict::of_all(
        fresh
            .gates
            .iter()
            .filter(|g| gates.contains(&g.id))
            .map(|g| g.verdict),
    )
}

/// The line said after a rerun: which gates, how each came out, and whether the run judged the
/// record's connector and engine.
pub fn summary(path: &Path, rerun: &Rerun, fresh: &Record) -> String {
    let each: Vec<String> = fresh
        .gates
        .iter()
        .filter(|g| rerun.gates.contains(&g.id))
        .map(|g| format!("{} {}", g.id, g.verdict))
        .collect();
    let mut line = format!(
        "reran what {} did not pass (seed {}, {}): {}",
        path.display(),
        rerun.record.header.seed,
        engine(&fresh.header),
        each.join(", ")
    );
    let (was, now) = (&rerun.record.header, &fresh.header);
    if was.connector_name != now.connector_name {
        line.push_str(&format!(
            "; the record is of {}, this run judged {}",
            was.connector_name, now.connector_name
        ));
    }
    if engine(was) != engine(now) {
        line.push_str(&format!(
            "; the record was judged on {}, this run on {}",
            engine(was),
            engine(now)
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::grid::tests::record;

    #[test]
    fn only_what_did_not_pass_is_rerun() {
        let mut r = record("echomq-python", "valkey", "9.1.2", true);
        assert_eq!(not_passed(&r), [GateId::G8]);
        r.gates[1].verdict = Verdict::Error;
        r.gates[2].verdict = Verdict::NotRun;
        r.gates.retain(|g| g.id != GateId::G4);
        assert_eq!(not_passed(&r), [GateId::G2, GateId::G4, GateId::G8]);
        let clean = record("echomq-python", "valkey", "9.1.2", false);
        assert!(not_passed(&clean).is_empty());
    }

    #[test]
    fn a_rerun_takes_the_record_seed_and_judges_only_its_gates() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = record("echomq-python", "valkey", "9.1.2", true);
        r.header.seed = 77;
        r.header.histories = 12;
        r.header.batch = 1000;
        let path = dir.path().join("python.json");
        r.write(dir.path(), "python").unwrap();
        let opts = RunOptions {
            engine: crate::engine::EngineOptions::default(),
            subject: crate::cmd::run::Subject::Reference,
            seed: 1,
            histories: 256,
            batch: 100_000,
            only: None,
            fail_fast: false,
            one_engine: true,
            dirs: crate::cmd::sources::Dirs {
                bundle: dir.path().into(),
                cases: crate::suites::cases::format::Corpus::at(dir.path()),
            },
        };
        let rerun = prepare(&path, opts.clone(), true).unwrap().unwrap();
        assert_eq!(
            (
                rerun.options.seed,
                rerun.options.histories,
                rerun.options.batch
            ),
            (77, 12, 1000)
        );
        assert_eq!(rerun.options.only, Some(vec![GateId::G8]));
        assert_eq!(
            rerun.options.engine.choice,
            EngineChoice::Auto,
            "own engine"
        );
        // The fresh run: G8 passes now; the unselected gates are NOT RUN, no failure nor error.
        let mut fresh = record("echomq-python", "valkey", "9.1.2", false);
        for g in &mut fresh.gates {
            if g.id != GateId::G8 {
                g.verdict = Verdict::NotRun;
            }
        }
        assert_eq!(verdict(&fresh, &rerun.gates), Verdict::Pass);
        assert_eq!(fresh.verdict(), Verdict::Pass);
        assert_eq!(fresh.count().headline(), "PASS 1/1 (7 not run)");
        let line = summary(&path, &rerun, &fresh);
        assert!(line.ends_with("(seed 77, valkey-9.1): G8 PASS"), "{line}");
        // Another engine or connector than the record's is said, not hidden.
        fresh.header.engine_kind = "cluster".into();
        fresh.header.connector_name = "echomq-node".into();
        let line = summary(&path, &rerun, &fresh);
        assert!(
            line.ends_with(
                "G8 PASS; the record is of echomq-python, this run judged echomq-node; \
                 the record was judged on valkey-9.1, this run on valkey-9.1-cluster"
            ),
            "{line}"
        );
        let clean = record("echomq-python", "valkey", "9.1.2", false);
        clean.write(dir.path(), "clean").unwrap();
        assert!(
            prepare(&dir.path().join("clean.json"), opts, true)
                .unwrap()
                .is_none()
        );
    }
}
