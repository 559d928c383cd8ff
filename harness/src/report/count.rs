//! A run's count: the one verdict of its gates and its headline (`PASS 8/8`, `PASS 1/1 (7 not
//! run)`), the same in the record's footer, the matrix, `summary`, the badge and the exit code.

use crate::gates::Verdict;

/// How a run's gates came out, for its one verdict and its headline: the verdicts of the gates
/// it ran, how many passed, how many it left out (NOT RUN), and whether a gate is missing
/// altogether (a truncated record, a test's sample).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count {
    pub verdicts: Vec<Verdict>,
    pub passed: usize,
    /// The gates judged, and those missing: `n/total`.
    pub total: usize,
    pub not_run: usize,
    pub missing: usize,
}

impl Count {
    /// The count of `gates` (id and verdict each) against the eight.
    pub fn of(gates: impl IntoIterator<Item = (crate::gates::GateId, Verdict)>) -> Self {
        let gates: Vec<_> = gates.into_iter().collect();
        let missing = crate::gates::ALL
            .iter()
            .filter(|g| !gates.iter().any(|(id, _)| *id == g.id))
            .count();
        let verdicts: Vec<Verdict> = gates.iter().map(|(_, v)| *v).collect();
        let run = verdicts.iter().filter(|v| v.was_run()).count();
        Self {
            passed: verdicts.iter().filter(|v| **v == Verdict::Pass).count(),
            not_run: verdicts.len() - run,
            total: run + missing,
            missing,
            verdicts,
        }
    }

    /// PASS when every gate run passed and none is missing; otherwise [`Verdict::of_all`] of the
    /// gates run (FAIL over ERROR), a missing gate counting as ERROR: never a pass, never a
    /// failure. A gate NOT RUN counts for nothing: a partial run is judged on what it ran.
    pub fn verdict(&self) -> Verdict {
        let missing = std::iter::repeat_n(Verdict::Error, self.missing);
        Verdict::of_all(self.verdicts.iter().copied().chain(missing))
    }

    /// `PASS 8/8`; a partial run says what it left out, as `cargo test` a filter does:
    /// `PASS 1/1 (7 not run)`.
    pub fn headline(&self) -> String {
        let mut s = format!("{} {}/{}", self.verdict(), self.passed, self.total);
        if self.not_run > 0 {
            s.push_str(&format!(" ({} not run)", self.not_run));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_error_when_nothing_failed_and_fail_when_anything_did() {
        use crate::gates::GateId;
        use Verdict::{Error, Fail, Pass};
        let count = |vs: &[Verdict]| Count::of(GateId::ALL.into_iter().zip(vs.iter().copied()));
        assert_eq!(count(&[Pass; 8]).verdict(), Pass);
        assert_eq!(count(&[Pass; 8]).headline(), "PASS 8/8");
        let mut some = [Pass; 8];
        some[3] = Error;
        assert_eq!(count(&some).headline(), "ERROR 7/8");
        some[5] = Fail;
        assert_eq!(count(&some).headline(), "FAIL 6/8");
        // Missing gates (the first only): never a pass, never a failure.
        assert_eq!(count(&[Pass]).headline(), "ERROR 1/8");
        assert_eq!(count(&[]).verdict(), Error);
        assert_eq!(
            crate::error::ExitCode::from(count(&[Pass, Error]).verdict()) as u8,
            4
        );
    }

    #[test]
    fn a_partial_run_is_judged_on_the_gates_it_ran() {
        use crate::gates::GateId;
        use Verdict::{Error, Fail, NotRun, Pass};
        let count = |vs: &[Verdict]| Count::of(GateId::ALL.into_iter().zip(vs.iter().copied()));
        let mut only_g2 = [NotRun; 8];
        only_g2[1] = Pass;
        assert_eq!(count(&only_g2).verdict(), Pass);
        assert_eq!(count(&only_g2).headline(), "PASS 1/1 (7 not run)");
        assert_eq!(
            crate::error::ExitCode::from(count(&only_g2).verdict()) as u8,
            0
        );
        only_g2[1] = Fail;
        assert_eq!(count(&only_g2).headline(), "FAIL 0/1 (7 not run)");
        only_g2[1] = Error;
        assert_eq!(count(&only_g2).headline(), "ERROR 0/1 (7 not run)");
        // Nothing run at all is no verdict.
        assert_eq!(count(&[NotRun; 8]).verdict(), Error);
    }
}
