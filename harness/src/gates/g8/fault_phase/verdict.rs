//! The fault phase's verdict, pure: what the trials added up to (the breaches in its [`Ledger`],
//! the §3 violations) judged into the gate's lines, apart from the I/O that ran them.

use std::collections::BTreeSet;

use super::{FAULTS, ROUNDS, fault_name, verbs};
use crate::gates::GateOutcome;
use crate::gates::g8::accounting::RAN_TWICE;
use crate::gates::g8::ledger::Ledger;

/// Breaches shown in evidence; the rest are counted.
const SHOWN: usize = 12;

/// The phase's verdict lines: what ran, the accounting (breaches shown up to [`SHOWN`]), §3.
pub(super) fn verdict(
    seed: u64,
    cluster: bool,
    calls: usize,
    ledger: &Ledger,
    violations: BTreeSet<String>,
    out: &mut GateOutcome,
) {
    let through = if cluster {
        "the proxy of the node that owns its queue's slot (every node's clients go through one)"
    } else {
        "the harness's proxy"
    };
    out.pass(format!(
        "fault phase (seed {}): {calls} calls through {through}, each meeting one fault on its own \
         EVALSHA: every mutating verb ({}) × {{{}}}, {ROUNDS} times each; and a reset on connect",
        seed,
        verbs()
            .iter()
            .map(|v| v.name())
            .collect::<Vec<_>>()
            .join(", "),
        FAULTS.map(fault_name).join(", "),
    ));
    let rule = "every faulted call accounted: a call that failed ran at most once (kind engine), a call that \
                succeeded ran exactly once and answered what the scripts answer; no job duplicated, lost or made by no call";
    let mut breaches = ledger.breaches().to_vec();
    if breaches.is_empty() {
        out.pass(rule);
    } else {
        // The cause before its effects: a call that ran twice (a re-send) first, the trial order
        // kept within each group.
        breaches.sort_by_key(|b| !b.contains(RAN_TWICE));
        let twice: BTreeSet<&str> = breaches
            .iter()
            .filter_map(|b| b.split_once(RAN_TWICE))
            .map(|(call, _)| call.trim_start_matches("duplicate: ").trim())
            .collect();
        let twice = twice.len();
        if twice > 0 {
            out.fail(format!(
                "{twice} faulted calls ran twice: the connector re-sent a script call whose reply was lost (R4.17 forbids it); first: {}",
                breaches[0]
            ));
        }
        out.fail(format!("{rule}; {} breaches", breaches.len()));
        let more = breaches.len().saturating_sub(SHOWN);
        for b in breaches.into_iter().take(SHOWN) {
            out.fail(b);
        }
        if more > 0 {
            out.fail(format!("… and {more} more breaches"));
        }
    }
    let violations: Vec<String> = violations.into_iter().take(5).collect();
    out.none_of(
        &violations,
        "keyspace before and after every faulted call: no violation of §3",
        "",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ConnectorError, ErrorKind};
    use crate::gates::{GateId, Severity, Verdict};

    fn judged(ledger: &Ledger) -> crate::gates::GateOutcome {
        let mut out = crate::gates::GateOutcome::new(GateId::G8, "G8");
        verdict(7, false, 56, ledger, BTreeSet::new(), &mut out);
        out
    }

    #[test]
    fn no_breach_passes_and_a_call_that_ran_twice_is_named_first() {
        let mut ledger = Ledger::default();
        assert_eq!(judged(&ledger).verdict, Verdict::Pass);
        ledger.breach("claim (fault trial 1 of 56, lost reply): lost j1");
        ledger.breach(format!(
            "enqueue (fault trial 2 of 56, cut reply) {RAN_TWICE}: it answered 2"
        ));
        // A call that failed with a kind other than engine: the ledger names it.
        let internal = ConnectorError::new(ErrorKind::Internal, "garbage");
        ledger.told::<()>("reap (fault trial 3 of 56, cut reply)", &Err(internal));
        let out = judged(&ledger);
        assert_eq!(out.verdict, Verdict::Fail);
        let fails: Vec<&str> = out
            .evidence
            .iter()
            .filter(|e| e.severity == Severity::Fail)
            .map(|e| e.text.as_str())
            .collect();
        assert!(
            fails[0].starts_with("1 faulted calls ran twice"),
            "{fails:#?}"
        );
        assert!(fails[1].ends_with("; 3 breaches"), "{fails:#?}");
        assert!(fails[2].contains(RAN_TWICE), "{fails:#?}");
        assert_eq!(
            fails[4],
            "reap (fault trial 3 of 56, cut reply): failed with kind internal, not engine"
        );
    }
}
