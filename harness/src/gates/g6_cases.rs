//! G6: every YAML case of `cases/` passes against the connector, each in a database of its own.

use crate::cases::format::{default_dir, load_dir};
use crate::cases::runner::{Mode, run_case};
use crate::gate::{GateContext, GateOutcome};

/// Databases G6 uses: one per case, above the test suite's and below the other gates'.
const FIRST_DB: u32 = 200;

pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) {
    let cases = match load_dir(&default_dir()) {
        Ok(c) if c.is_empty() => return out.error("no case in cases/"),
        Ok(c) => c,
        Err(e) => return out.error(e.to_string()),
    };
    let mut failed = 0;
    // One connector serves case after case (the runner disconnects its sessions); a failure
    // gets a fresh one, so one broken case cannot spill into the next.
    let mut current = None;
    for (i, case) in cases.iter().enumerate() {
        (ctx.progress)(&format!("G6 case {}/{}: {}", i + 1, cases.len(), case.id));
        let connector = match current.take() {
            Some(c) => Ok(c),
            None => ctx.factory.make(),
        };
        let mut connector = match connector {
            Ok(c) => c,
            Err(e) => return out.error(format!("cannot start the connector: {e}")),
        };
        let db = FIRST_DB + (i as u32 % 600);
        match run_case(case, ctx.engine, db, connector.as_mut(), Mode::Check).failure {
            None => current = Some(connector),
            Some(f) => {
                failed += 1;
                out.fail(f.to_string().lines().next().unwrap_or_default().to_string());
                let tail = connector.log_tail();
                if !tail.is_empty() {
                    out.figure(&format!("log_{}", case.id), tail);
                }
            }
        }
    }
    out.check(
        failed == 0,
        format!("{} of {} cases passed", cases.len() - failed, cases.len()),
    );
}
