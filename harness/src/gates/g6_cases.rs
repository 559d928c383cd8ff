//! G6: every YAML case of `cases/` passes against the connector, each in a database of its own.

use crate::gates::{CaseOutcome, GateContext, GateError, GateOutcome, Verdict};
use crate::suites::cases::format::Case;
use crate::suites::cases::runner::{Mode, run_case};

/// Databases G6 uses: one per case, above the test suite's and below the other gates'.
const FIRST_DB: u32 = 200;

/// Consecutive cases failing at setup (connect) after which the rest are not run: a connector
/// that hangs or dies must not cost one timeout per case.
const GIVE_UP_AFTER: usize = 3;

pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let cases = ctx.cases.load()?;
    if cases.is_empty() {
        return Err(GateError::instrument("no case in cases/"));
    }
    let mut failed = 0;
    // One connector serves case after case (the runner disconnects its sessions); a failure
    // gets a fresh one, so one broken case cannot spill into the next.
    let mut current = None;
    let mut setup_failures = 0;
    let mut widest: Option<i64> = None;
    for (i, case) in cases.iter().enumerate() {
        if setup_failures >= GIVE_UP_AFTER {
            failed += give_up(out, &cases[i..]);
            break;
        }
        (ctx.progress)(&format!("G6 case {}/{}: {}", i + 1, cases.len(), case.id));
        let mut connector = match current.take() {
            Some(c) => c,
            None => ctx
                .factory
                .make()
                .map_err(|e| GateError::instrument(format!("cannot start the connector: {e}")))?,
        };
        let db = FIRST_DB + (i as u32 % 600);
        let t0 = std::time::Instant::now();
        let result = run_case(case, ctx.engine, db, connector.as_mut(), Mode::Check);
        if let Some(w) = result.widest_bracket_ms {
            widest = Some(widest.map_or(w, |x| x.max(w)));
        }
        let failure = result.failure;
        out.cases.push(CaseOutcome {
            id: case.id.clone(),
            verdict: if failure.is_some() {
                Verdict::Fail
            } else {
                Verdict::Pass
            },
            message: failure.as_ref().map(first_line),
            wall: t0.elapsed(),
        });
        match failure {
            None => {
                setup_failures = 0;
                current = Some(connector);
            }
            Some(f) => {
                failed += 1;
                setup_failures = if f.step == 0 { setup_failures + 1 } else { 0 };
                out.fail(first_line(&f));
                let tail = connector.log_tail();
                if !tail.is_empty() {
                    out.figure(&format!("log_{}", case.id), tail);
                }
            }
        }
    }
    if let Some(w) = widest {
        out.figure("widest_bracket_ms", w);
    }
    out.check(
        failed == 0,
        format!("{} of {} cases passed", cases.len() - failed, cases.len()),
    );
    Ok(())
}

/// The cases left when the connector could not connect [`GIVE_UP_AFTER`] times in a row: each
/// an ERROR, not run; how many.
fn give_up(out: &mut GateOutcome, rest: &[Case]) -> usize {
    out.fail(format!(
        "{} cases not run: the connector could not even connect in the last {GIVE_UP_AFTER}",
        rest.len()
    ));
    for case in rest {
        out.cases.push(CaseOutcome {
            id: case.id.clone(),
            verdict: Verdict::Error,
            message: Some("not run: the connector could not connect".into()),
            wall: std::time::Duration::ZERO,
        });
    }
    rest.len()
}

/// A failure's first line: the case's verdict message and the gate's evidence.
fn first_line(f: &impl std::fmt::Display) -> String {
    f.to_string().lines().next().unwrap_or_default().to_string()
}
