//! The ways to break a rule (issue #33): a double breaks its rule **one** way, and a check written
//! against that one double often judges one side only. So each rule lists its ways — too few / too
//! many, too early / too late, never / twice, opened / not closed, on this connection / on another,
//! refused / accepted, or otherwise — and each way names the doubles (or child fixtures) that
//! break the rule that way, or says in one sentence why no connector plausibly takes it or why no
//! gate can see it. [`loose`] finds a way with neither, and `emq-gate rules` fails on one.

use super::{CATALOGUE, Rule};
use crate::doubles::Double;
use crate::gates::GateId;

/// The side a way breaks a rule from: the axes of issue #33, plus [`How::Otherwise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum How {
    /// Fewer than the rule asks (commands, jobs, a shorter pipeline).
    TooFew,
    /// More than the rule asks (a deeper pipeline, one row more).
    TooMany,
    /// Before the rule allows (a script before the fence read, a score due sooner).
    TooEarly,
    /// After the rule allows (a score due later, a refusal after a byte was sent).
    TooLate,
    /// Not at all (no fence read, no load on a miss).
    Never,
    /// Once more than asked (a call re-sent, a job enqueued twice).
    Twice,
    /// Something opened that the rule forbids (a connection dialled without the fence).
    Opened,
    /// Something the rule closes left open (a session's socket after `disconnect`).
    NotClosed,
    /// On this connection where another was due (a session sharing another's connection).
    OnThis,
    /// On another connection or node than the one due (a load on the seed, a reply read late).
    OnAnother,
    /// Valid input refused (a check stricter than SPEC).
    Refused,
    /// Invalid input accepted (a check looser than SPEC).
    Accepted,
    /// Something else in its place: another command, kind, order or value.
    Otherwise,
}

impl How {
    /// The words `emq-gate rules` and SPEC §6 print.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooFew => "too few",
            Self::TooMany => "too many",
            Self::TooEarly => "too early",
            Self::TooLate => "too late",
            Self::Never => "never",
            Self::Twice => "twice",
            Self::Opened => "opened",
            Self::NotClosed => "not closed",
            Self::OnThis => "on this connection",
            Self::OnAnother => "on another",
            Self::Refused => "refused",
            Self::Accepted => "accepted",
            Self::Otherwise => "otherwise",
        }
    }
}

/// One way to break a rule, and what shows the gate sees it (or why nothing needs to).
#[derive(Debug, Clone, Copy)]
pub struct Way {
    pub how: How,
    /// The way, concretely, in a line.
    pub what: &'static str,
    /// The doubles that break the rule this way; each FAILs every gate of the rule.
    pub doubles: &'static [Double],
    /// The child fixtures (`harness/tests/fixtures/`) that break it this way, judged live by
    /// `tests/rules.rs`' kill matrix.
    pub fixtures: &'static [&'static str],
    /// Empty when a double or fixture breaks it; otherwise why no connector plausibly takes this
    /// way, or why no gate can see it, in one sentence.
    pub reason: &'static str,
}

impl Way {
    /// A way that `doubles` take.
    pub const fn by(how: How, what: &'static str, doubles: &'static [Double]) -> Self {
        Self {
            how,
            what,
            doubles,
            fixtures: &[],
            reason: "",
        }
    }

    /// A way that child `fixtures` take.
    pub const fn fixtures(how: How, what: &'static str, fixtures: &'static [&'static str]) -> Self {
        Self {
            how,
            what,
            doubles: &[],
            fixtures,
            reason: "",
        }
    }

    /// A way no double takes, and `reason` why none needs to.
    pub const fn not(how: How, what: &'static str, reason: &'static str) -> Self {
        Self {
            how,
            what,
            doubles: &[],
            fixtures: &[],
            reason,
        }
    }

    /// True when a double or a fixture breaks the rule this way.
    pub fn broken(&self) -> bool {
        !self.doubles.is_empty() || !self.fixtures.is_empty()
    }

    /// What stands behind it, as `emq-gate rules` prints it: the breakers, or the reason.
    pub fn behind(&self) -> String {
        if self.broken() {
            let names: Vec<String> = self
                .doubles
                .iter()
                .map(|d| format!("{d:?}"))
                .chain(self.fixtures.iter().map(|f| format!("fixture:{f}")))
                .collect();
            format!("broken by {}", names.join(", "))
        } else {
            format!("no double: {}", self.reason)
        }
    }
}

/// The ways of `rules` that break their contract: a way with neither a breaker nor a reason,
/// or with both; a breakable rule with fewer than two ways (one side only is what #33 is about)
/// or with no way a double takes; an unbreakable rule with a way a double takes; a reason that
/// is not one line. One line per problem, naming the rule and the way. Pure.
pub fn loose(rules: &[Rule]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rules {
        if r.breakable() && r.ways.len() < 2 {
            out.push(format!(
                "{}: name at least two ways to break it (one side only is what #33 is about)",
                r.id
            ));
        }
        if r.breakable() && !r.ways.iter().any(Way::broken) {
            out.push(format!("{}: breakable, but no way has a double", r.id));
        }
        if r.ways.is_empty() {
            out.push(format!("{}: no way to break it is named", r.id));
        }
        for w in r.ways {
            let name = format!("{} {} ({})", r.id, w.how.as_str(), w.what);
            match (w.broken(), w.reason.is_empty()) {
                (false, true) => out.push(format!("{name}: neither a double nor a reason")),
                (true, false) => out.push(format!("{name}: a double and a reason; pick one")),
                _ => {}
            }
            if !r.breakable() && w.broken() {
                out.push(format!(
                    "{name}: the rule is unbreakable, yet a double breaks it"
                ));
            }
            if w.reason.contains('\n') || w.what.contains('\n') || w.what.is_empty() {
                out.push(format!("{name}: the way and its reason are one line each"));
            }
        }
    }
    out
}

/// The ways of the catalogue's rules that `gate` judges: the ways a double or fixture takes, of
/// each rule that names `gate` (every double of a rule FAILs every gate it names: the kill
/// matrix), in catalogue order.
pub fn judged_by(gate: GateId) -> Vec<(&'static Rule, Vec<&'static Way>)> {
    CATALOGUE
        .iter()
        .filter(|r| r.gates.contains(&gate))
        .map(|r| (r, r.ways.iter().filter(|w| w.broken()).collect::<Vec<_>>()))
        .filter(|(_, ways)| !ways.is_empty())
        .collect()
}

/// The heading of SPEC §6's per-gate list, which [`spec_section`] writes under it.
pub const SPEC_HEADING: &str = "### The ways each gate judges";
/// Where the generated list begins and ends in SPEC (HTML comments: invisible when rendered).
pub const SPEC_BEGIN: &str = "<!-- generated by emq-gate from the rule catalogue: begin -->";
pub const SPEC_END: &str = "<!-- generated: end -->";

/// SPEC §6's list, from the catalogue: per gate, each rule it judges with the ways of breaking
/// it that a deliberately broken connector shows the gate catches (a `tests/rules.rs` test keeps
/// SPEC's copy equal; `EMQ_BLESS=1` rewrites it).
pub fn spec_section() -> String {
    let mut s =
        String::from("| gate | the rules it judges, and the ways of breaking each |\n|---|---|\n");
    for gate in GateId::ALL {
        let rules: Vec<String> = judged_by(gate)
            .into_iter()
            .map(|(r, ways)| {
                let mut hows: Vec<&str> = Vec::new();
                for w in ways {
                    if !hows.contains(&w.how.as_str()) {
                        hows.push(w.how.as_str());
                    }
                }
                format!("{} ({})", r.id, hows.join(", "))
            })
            .collect();
        s.push_str(&format!("| {gate} | {} |\n", rules.join("; ")));
    }
    s
}

/// SPEC's copy of [`spec_section`]: the text between [`SPEC_BEGIN`] and [`SPEC_END`], or `None`
/// when the markers are missing.
pub fn spec_copy(spec: &str) -> Option<&str> {
    let start = spec.find(SPEC_BEGIN)? + SPEC_BEGIN.len();
    let end = spec[start..].find(SPEC_END)? + start;
    Some(spec[start..end].trim_matches('\n'))
}

/// `spec` with its copy replaced by `section` (for `EMQ_BLESS=1`); `None` without the markers.
pub fn with_spec_copy(spec: &str, section: &str) -> Option<String> {
    let start = spec.find(SPEC_BEGIN)? + SPEC_BEGIN.len();
    let end = spec[start..].find(SPEC_END)? + start;
    Some(format!(
        "{}\n{}\n{}",
        &spec[..start],
        section.trim_matches('\n'),
        &spec[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::rules::RuleId;

    fn rule(ways: &'static [Way], unbreakable: &'static str) -> Rule {
        Rule {
            id: RuleId::new(9, 9),
            summary: "s",
            checks: &["c"],
            cases: &[],
            gates: &[],
            ways,
            unbreakable,
        }
    }

    #[test]
    fn a_way_without_a_double_or_a_reason_is_loose_and_one_with_either_is_not() {
        const GOOD: &[Way] = &[
            Way::by(How::TooFew, "one fewer", &[Double::ShortBatch]),
            Way::not(How::TooMany, "one more", "no client library adds one"),
        ];
        assert!(loose(&[rule(GOOD, "")]).is_empty());
        const BARE: &[Way] = &[
            Way::by(How::TooFew, "one fewer", &[Double::ShortBatch]),
            Way::not(How::TooMany, "one more", ""),
        ];
        let found = loose(&[rule(BARE, "")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("R9.9 too many (one more): neither"),
            "{found:?}"
        );
    }

    #[test]
    fn a_one_sided_or_unbroken_rule_is_loose_and_an_unbreakable_one_takes_no_double() {
        const ONE: &[Way] = &[Way::by(How::TooFew, "one fewer", &[Double::ShortBatch])];
        assert!(loose(&[rule(ONE, "")])[0].contains("at least two ways"));
        const REASONS: &[Way] = &[
            Way::not(How::TooFew, "a", "r"),
            Way::not(How::TooMany, "b", "r"),
        ];
        assert!(loose(&[rule(REASONS, "")])[0].contains("no way has a double"));
        assert!(loose(&[rule(REASONS, "the bundle's")]).is_empty());
        assert!(loose(&[rule(ONE, "the bundle's")])[0].contains("unbreakable, yet"));
    }

    #[test]
    fn the_spec_copy_is_read_and_replaced_between_its_markers() {
        let spec = format!("a\n{SPEC_BEGIN}\nold\n{SPEC_END}\nb\n");
        assert_eq!(spec_copy(&spec), Some("old"));
        let new = with_spec_copy(&spec, "new\n").unwrap();
        assert_eq!(spec_copy(&new), Some("new"));
        assert!(new.starts_with("a\n") && new.ends_with(&format!("{SPEC_END}\nb\n")));
        assert_eq!(spec_copy("no markers"), None);
    }
}
