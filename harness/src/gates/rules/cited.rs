//! A rule's verdict is its own checks': which rules a gate's evidence line judges, read from the
//! `R<section>.<n>` ids it cites (most FAIL lines end in `(R5.13: ...)`), and the verdict a gate
//! gives one rule from the lines that concern it. A line citing no rule concerns every rule the
//! gate judges (the gate's whole verdict, as before lines cited rules); a line citing rules
//! concerns those alone, so a gate that failed on R5.13 fails R5.13, not every rule of G1.
//!
//! The record keeps lines, not structured rule ids (its schema unchanged): the ids are parsed
//! back here, the one place, for `diff`, baselines and the rules a record fails.

use crate::gates::rules::{CATALOGUE, RuleId};
use crate::gates::{Evidence, Severity, Verdict};

/// `(R3.2: an absent fence is installed ...)`: a rule as a FAIL line cites it, by its id and its
/// text from the catalogue (what the connector broke, never a compliant example), so the line
/// counts for that rule alone ([`cited`]). An id the catalogue lacks is cited by id only.
pub fn cite(id: RuleId) -> String {
    match CATALOGUE.iter().find(|r| r.id == id) {
        Some(r) => format!("({id}: {})", r.summary),
        None => format!("({id})"),
    }
}

/// The catalogue's rules `text` cites (`R5.13`, `R10.2`), each once, in order. An id the
/// catalogue does not hold (a typo, a rule since removed) is none.
pub fn cited(text: &str) -> Vec<RuleId> {
    let mut out: Vec<RuleId> = Vec::new();
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices('R') {
        // `R` must begin a word: `PRR1.2` is no citation.
        if i > 0 && bytes[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let rest = &text[i + 1..];
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let a = digits(rest);
        if a == 0 || !rest[a..].starts_with('.') {
            continue;
        }
        let b = digits(&rest[a + 1..]);
        if b == 0 {
            continue;
        }
        let (Ok(section), Ok(n)) = (
            rest[..a].parse::<u8>(),
            rest[a + 1..a + 1 + b].parse::<u8>(),
        ) else {
            continue;
        };
        let id = RuleId::new(section, n);
        if CATALOGUE.iter().any(|r| r.id == id) && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// True when `line` concerns `rule`: it cites it, or it cites none and its gate judges `rule`
/// (`judges`: the rule's checks name the gate).
pub fn concerns(line: &Evidence, rule: RuleId, judges: bool) -> bool {
    let ids = cited(&line.text);
    if ids.is_empty() {
        judges
    } else {
        ids.contains(&rule)
    }
}

/// The verdict a gate with `verdict` and `evidence` gives `rule` ([`Verdict::of_all`] of the
/// violations that concern it; PASS when none does). `None` when the gate says nothing of it:
/// NOT RUN, or it neither judges the rule nor cites it. A gate voided to ERROR (an engine event)
/// proves no FAIL of any rule: its FAIL lines count as ERROR.
pub fn verdict_for(
    verdict: Verdict,
    evidence: &[Evidence],
    rule: RuleId,
    judges: bool,
) -> Option<Verdict> {
    if !verdict.was_run() {
        return None;
    }
    let own: Vec<Verdict> = evidence
        .iter()
        .filter(|e| e.severity.is_violation() && concerns(e, rule, judges))
        .map(|e| match (e.severity, verdict) {
            (Severity::Fail, Verdict::Error) => Verdict::Error,
            (s, _) => s.verdict(),
        })
        .collect();
    if own.is_empty() {
        // A gate ERROR with no violation line at all (a record's bare verdict) is ERROR.
        let bare = verdict != Verdict::Pass && !evidence.iter().any(|e| e.severity.is_violation());
        return judges.then_some(if bare { verdict } else { Verdict::Pass });
    }
    Some(Verdict::of_all(own))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(t: &str) -> Evidence {
        Evidence::new(Severity::Fail, t)
    }

    fn error(t: &str) -> Evidence {
        Evidence::new(Severity::Error, t)
    }

    #[test]
    fn a_line_cites_the_catalogue_rules_it_names() {
        assert_eq!(
            cited("left 1 connection open (R5.13: a connect closes the old ones); see R3.1, R5.13"),
            [RuleId::new(5, 13), RuleId::new(3, 1)]
        );
        assert_eq!(
            cited("TLS from the first byte (R10.2 …)"),
            [RuleId::new(10, 2)]
        );
        assert!(cited("no rule here, R99.1 is none, PR1.2 neither, R1. nor R.1").is_empty());
    }

    #[test]
    fn a_citation_reads_back_as_its_rule() {
        let c = cite(RuleId::new(3, 2));
        assert!(c.starts_with("(R3.2: an absent fence is installed"), "{c}");
        assert_eq!(cited(&c), [RuleId::new(3, 2)]);
    }

    #[test]
    fn a_fail_counts_for_the_rule_it_cites_alone() {
        let ev = [
            Evidence::held("the fence was read first (R3.1)"),
            fail("a connect left 1 connection open (R5.13: a connect closes the old connections)"),
        ];
        let r513 = RuleId::new(5, 13);
        let r31 = RuleId::new(3, 1);
        assert_eq!(
            verdict_for(Verdict::Fail, &ev, r513, true),
            Some(Verdict::Fail)
        );
        assert_eq!(
            verdict_for(Verdict::Fail, &ev, r31, true),
            Some(Verdict::Pass)
        );
        // A rule the gate does not judge, and no line cites: the gate says nothing of it.
        assert_eq!(
            verdict_for(Verdict::Fail, &ev, RuleId::new(1, 1), false),
            None
        );
        // Cited by a gate that does not judge it (R10.2 in any gate on a TLS engine).
        let plain = [fail(
            "1 connection(s) began in plaintext (R10.2: TLS from the first byte)",
        )];
        assert_eq!(
            verdict_for(Verdict::Fail, &plain, RuleId::new(10, 2), false),
            Some(Verdict::Fail)
        );
    }

    #[test]
    fn a_line_citing_no_rule_falls_back_to_every_rule_of_the_gate() {
        let ev = [fail(
            "the first connect on a fresh database failed (kind engine)",
        )];
        for rule in [RuleId::new(3, 1), RuleId::new(5, 13)] {
            assert_eq!(
                verdict_for(Verdict::Fail, &ev, rule, true),
                Some(Verdict::Fail)
            );
        }
        let ev = [error("MONITOR saw nothing")];
        assert_eq!(
            verdict_for(Verdict::Error, &ev, RuleId::new(3, 1), true),
            Some(Verdict::Error)
        );
    }

    #[test]
    fn the_precedence_holds_per_rule_and_a_voided_gate_proves_no_fail() {
        let ev = [
            fail("began in plaintext (R10.2: TLS from the first byte)"),
            error("the TLS front saw 1 of the 2 connections it was given end"),
        ];
        let r102 = RuleId::new(10, 2);
        assert_eq!(
            verdict_for(Verdict::Fail, &ev, r102, true),
            Some(Verdict::Fail)
        );
        assert_eq!(
            verdict_for(Verdict::Fail, &ev, RuleId::new(10, 3), true),
            Some(Verdict::Error)
        );
        assert_eq!(
            verdict_for(Verdict::Error, &ev, r102, true),
            Some(Verdict::Error)
        );
        assert_eq!(verdict_for(Verdict::NotRun, &ev, r102, true), None);
        // A bare verdict, no lines (a hand-made record): the gate's own.
        assert_eq!(
            verdict_for(Verdict::Fail, &[], r102, true),
            Some(Verdict::Fail)
        );
    }
}
