//! Expected failures (`--baseline FILE`): a connector commits the gates and rules it is known to
//! fail, each with a reason, so its CI tells a failure it already knows from a new one, and says
//! when a known failure went away (the author then removes the entry, and the file never hides a
//! regression of something that was fixed). Pure: parsing and accounting, no engine, no
//! printing; the commands read the file, attach the [`BaselineOutcome`] to the record and print.
//!
//! The file is YAML, like the cases (errors name `file:line:col`):
//!
//! ```yaml
//! expected:
//!   - id: G5                  # a gate: any failure of G5 is expected
//!     reason: the probe pipelines INCRBY (redis-py's incr()); fixed in 2.1
//!   - id: R1.1                # a rule: the failures of what judges it
//!     reason: queue names are checked by the engine, not before the call
//! ```
//!
//! A rule's failures are those `diff` gives it: its own G6 cases, and the FAIL lines of the
//! gates that judge it which cite it (`(R5.13: ...)`) or cite no rule at all
//! ([`crate::gates::rules::cited`]). So a rule judged by G1 expects G1's failures of its own
//! and those no line attributes, not a FAIL of G1 that cites another rule; a rule of G6 expects
//! only its own cases: a case no entry names is a new failure.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use crate::error::{ExitCode, HarnessError};
use crate::gates::rules::{CATALOGUE, Rule, RuleId, cited};
use crate::gates::{GateId, Severity, Verdict};
use crate::report::Record;

/// What an entry names: a gate or a rule of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Gate(GateId),
    Rule(RuleId),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Gate(g) => write!(f, "{g}"),
            Self::Rule(r) => write!(f, "{r}"),
        }
    }
}

impl std::str::FromStr for Target {
    type Err = BaselineError;
    fn from_str(s: &str) -> Result<Self, BaselineError> {
        let s = s.trim();
        if let Ok(g) = s.parse::<GateId>() {
            return Ok(Self::Gate(g));
        }
        CATALOGUE
            .iter()
            .find(|r| r.id.to_string().eq_ignore_ascii_case(s))
            .map(|r| Self::Rule(r.id))
            .ok_or_else(|| BaselineError::UnknownId(s.to_string()))
    }
}

/// One expected failure: what, why, and where in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub target: Target,
    pub reason: String,
    /// The entry's line (its `id`), for messages that send the author back to it.
    pub line: u64,
}

/// A parsed baseline file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// The file as the user named it (messages say `file:line`).
    pub file: String,
    pub entries: Vec<Entry>,
}

/// Why a baseline file is refused; located at `file:line:col` by [`Baseline::parse`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaselineError {
    #[error(
        "unknown gate or rule id {0:?}: a gate is G1 to G8, a rule is one `emq-gate rules` lists"
    )]
    UnknownId(String),
    #[error("the entry for {0} gives no reason: say why it is expected to fail")]
    NoReason(String),
    #[error("{id} is listed twice (first at line {first})")]
    Duplicate { id: String, first: u64 },
    #[error("{0}")]
    Yaml(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    expected: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    id: Spanned<String>,
    reason: Spanned<String>,
}

impl Baseline {
    /// Reads and parses `path`; a missing file is bad input (exit 2), like a malformed one.
    pub fn load(path: &Path) -> Result<Self, HarnessError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            HarnessError::BadInput(format!("--baseline {shown}: {}", io_reason(&e)))
        })?;
        Self::parse(&shown, &text)
    }

    /// Parses a baseline's text, the file named `shown` in messages.
    pub fn parse(shown: &str, text: &str) -> Result<Self, HarnessError> {
        let at = |line: u64, col: u64, e: BaselineError| HarnessError::located(shown, line, col, e);
        // A file of comments only is an empty baseline, not a YAML error.
        let raw: RawFile = if text.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#')
        }) {
            RawFile {
                expected: Vec::new(),
            }
        } else {
            let options = serde_saphyr::options! { strict_booleans: true, with_snippet: false };
            serde_saphyr::from_str_with_options(text, options).map_err(|e| {
                let (line, col) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
                let msg = e.to_string();
                let first = msg.lines().next().unwrap_or("invalid YAML");
                let first = first.split(" at line ").next().unwrap_or(first);
                at(line, col, BaselineError::Yaml(first.to_string()))
            })?
        };
        let mut entries: Vec<Entry> = Vec::new();
        for e in raw.expected {
            let (line, col) = (e.id.referenced.line(), e.id.referenced.column());
            let target: Target = e.id.value.parse().map_err(|err| at(line, col, err))?;
            if e.reason.value.trim().is_empty() {
                let r = e.reason.referenced;
                return Err(at(
                    r.line(),
                    r.column(),
                    BaselineError::NoReason(target.to_string()),
                ));
            }
            if let Some(first) = entries.iter().find(|x| x.target == target) {
                return Err(at(
                    line,
                    col,
                    BaselineError::Duplicate {
                        id: target.to_string(),
                        first: first.line,
                    },
                ));
            }
            entries.push(Entry {
                target,
                reason: e.reason.value.trim().to_string(),
                line,
            });
        }
        Ok(Self {
            file: shown.to_string(),
            entries,
        })
    }

    fn cite(&self, e: &Entry) -> EntryRef {
        EntryRef {
            id: e.target.to_string(),
            line: e.line,
            reason: e.reason.clone(),
        }
    }

    /// The entries that expect `gate`'s failure in `r`, or `Err` with the G6 cases none expects.
    fn expecting(&self, gate: &crate::report::GateVerdict) -> Result<Vec<EntryRef>, Vec<String>> {
        let named: Vec<EntryRef> = self
            .entries
            .iter()
            .filter(|e| e.target == Target::Gate(gate.id))
            .map(|e| self.cite(e))
            .collect();
        if !named.is_empty() {
            return Ok(named);
        }
        let rule_of = |id: RuleId| CATALOGUE.iter().find(|x| x.id == id);
        let rules = self.entries.iter().filter_map(|e| match e.target {
            Target::Rule(id) => rule_of(id).map(|rule| (e, rule)),
            Target::Gate(_) => None,
        });
        let rules: Vec<_> = rules.collect();
        if gate.id == GateId::G6 && !gate.cases.is_empty() {
            return self.expecting_cases(gate, &rules);
        }
        self.expecting_lines(gate, &rules)
    }

    /// G6's failure: expected when every failing case is one a rule entry names (the entries
    /// that do), else `Err` with the cases none names.
    fn expecting_cases(
        &self,
        gate: &crate::report::GateVerdict,
        rules: &[(&Entry, &Rule)],
    ) -> Result<Vec<EntryRef>, Vec<String>> {
        let failing: Vec<&str> = gate
            .cases
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .map(|c| c.id.as_str())
            .collect();
        let mut by: Vec<EntryRef> = Vec::new();
        let mut none: Vec<String> = Vec::new();
        for case in &failing {
            let covering: Vec<EntryRef> = rules
                .iter()
                .filter(|(_, rule)| rule.cases.contains(case))
                .map(|(e, _)| self.cite(e))
                .collect();
            if covering.is_empty() {
                none.push((*case).to_string());
            }
            for c in covering {
                if !by.contains(&c) {
                    by.push(c);
                }
            }
        }
        // G6 failed with every case passing (it could not load them): no rule names that.
        if none.is_empty() && !failing.is_empty() {
            Ok(by)
        } else {
            Err(none)
        }
    }

    /// Any other gate's failure: each FAIL line is expected by the rule entries it concerns.
    fn expecting_lines(
        &self,
        gate: &crate::report::GateVerdict,
        rules: &[(&Entry, &Rule)],
    ) -> Result<Vec<EntryRef>, Vec<String>> {
        // Each FAIL line is expected by the rule entries it concerns: those it cites, or, citing
        // none, those of the gate's rules; a line none expects is a new failure.
        let mut by: Vec<EntryRef> = Vec::new();
        let mut fails: Vec<crate::gates::Evidence> = gate
            .evidence
            .iter()
            .filter(|l| l.severity == Severity::Fail)
            .cloned()
            .collect();
        if fails.is_empty() {
            // A bare FAIL (no line says why): the gate's own, every rule of it.
            fails.push(crate::gates::Evidence::new(Severity::Fail, ""));
        }
        for line in &fails {
            let covering: Vec<EntryRef> = rules
                .iter()
                .filter(|(_, rule)| {
                    cited::concerns(line, rule.id, rule.judged_by().contains(&gate.id))
                })
                .map(|(e, _)| self.cite(e))
                .collect();
            if covering.is_empty() {
                return Err(Vec::new());
            }
            for c in covering {
                if !by.contains(&c) {
                    by.push(c);
                }
            }
        }
        if by.is_empty() {
            Err(Vec::new())
        } else {
            Ok(by)
        }
    }

    /// Which failures of `r` this baseline expects, which are new, and which entries passed.
    /// `scope`: the gates this run judged (a rerun's); `None` is all eight. A gate outside it,
    /// or a rule whose verdict is ERROR (a gate it names was not judged), is neither.
    pub fn account(&self, r: &Record, scope: Option<&[GateId]>) -> BaselineOutcome {
        let in_scope = |g: GateId| scope.is_none_or(|s| s.contains(&g));
        let mut out = BaselineOutcome {
            file: self.file.clone(),
            ..BaselineOutcome::default()
        };
        for g in r
            .gates
            .iter()
            .filter(|g| in_scope(g.id) && g.verdict == Verdict::Fail)
        {
            match self.expecting(g) {
                Ok(by) => out.expected.push(ExpectedGate { gate: g.id, by }),
                Err(cases) => {
                    out.new_failures.push(g.id);
                    out.new_cases.extend(cases);
                }
            }
        }
        let rules = crate::report::diff::rules(Some(r));
        for e in &self.entries {
            let passed = match e.target {
                Target::Gate(g) => {
                    in_scope(g)
                        && r.gates
                            .iter()
                            .any(|x| x.id == g && x.verdict == Verdict::Pass)
                }
                // A cluster rule (SPEC §8) is judged on a cluster only: its gates passing on one
                // engine say nothing of it.
                Target::Rule(id) => {
                    (r.header.engine_kind == "cluster"
                        || CATALOGUE.iter().any(|x| x.id == id && !x.on_cluster()))
                        && rules
                            .get(&id.to_string())
                            .is_some_and(|(v, _)| *v == Verdict::Pass)
                }
            };
            if passed {
                out.unexpected_passes.push(self.cite(e));
            }
        }
        out
    }
}

/// Why a file could not be read, lowercase (the OS's words start with a capital).
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        _ => e.to_string(),
    }
}

/// An entry as the record cites it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EntryRef {
    /// `G5` or `R4.11`.
    pub id: String,
    /// Its line in the baseline file.
    pub line: u64,
    pub reason: String,
}

/// A failed gate the baseline expects in full, and the entries that expect it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExpectedGate {
    pub gate: GateId,
    pub by: Vec<EntryRef>,
}

/// What `--baseline` made of a run; absent from a record made without one. Not compared by
/// `check` (the connector's verdicts are; a baseline is the author's reading of them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BaselineOutcome {
    /// The baseline file, as named on the command line.
    pub file: String,
    /// Each failed gate whose every failure the baseline expects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<ExpectedGate>,
    /// Failed gates with a failure no entry expects: a new failure (exit 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_failures: Vec<GateId>,
    /// The G6 cases among them that no rule entry names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_cases: Vec<String>,
    /// Entries whose gate or rule passed: the author removes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexpected_passes: Vec<EntryRef>,
}

impl BaselineOutcome {
    /// The exit code: 1 when something failed that no entry expects; else 4 when a gate in
    /// `scope` (all eight when `None`) is ERROR or missing (a gate NOT RUN is neither); else 5 when the only failures were
    /// expected; else 0. An unexpected pass alone changes no code: the connector got better.
    pub fn exit_code(&self, r: &Record, scope: Option<&[GateId]>) -> ExitCode {
        if !self.new_failures.is_empty() {
            return ExitCode::GateFailed;
        }
        let gates = scope.map_or(GateId::ALL.to_vec(), <[GateId]>::to_vec);
        let unjudged = gates.iter().any(|g| {
            !r.gates
                .iter()
                .any(|x| x.id == *g && x.verdict != Verdict::Error)
        });
        if unjudged {
            ExitCode::NoVerdict
        } else if self.expected.is_empty() {
            ExitCode::Pass
        } else {
            ExitCode::ExpectedFailures
        }
    }

    /// The entries expecting `gate`'s failure, when it was expected.
    pub fn expecting(&self, gate: GateId) -> Option<&[EntryRef]> {
        self.expected
            .iter()
            .find(|e| e.gate == gate)
            .map(|e| e.by.as_slice())
    }

    /// The record's headline with what the baseline made of it: `FAIL 6/8 (2 of 2 failures
    /// expected by b.yaml)`; the verdict itself is never softened.
    pub fn headline(&self, summary: &str) -> String {
        let failed = self.expected.len() + self.new_failures.len();
        let said = if failed == 0 {
            format!("nothing failed; baseline {}", self.file)
        } else {
            let noun = if failed == 1 { "failure" } else { "failures" };
            format!(
                "{} of {failed} {noun} expected by {}",
                self.expected.len(),
                self.file
            )
        };
        // A partial run's summary has its own parenthesis (`(6 not run)`): one, not two.
        match summary.strip_suffix(')') {
            Some(open) => format!("{open}; {said})"),
            None => format!("{summary} ({said})"),
        }
    }

    /// One line per new failure and per unexpected pass, for the author to act on.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for g in &self.new_failures {
            if *g == GateId::G6 && !self.new_cases.is_empty() {
                out.push(format!(
                    "new failure: G6, cases no entry of {} expects: {}",
                    self.file,
                    self.new_cases.join(", ")
                ));
            } else {
                out.push(format!(
                    "new failure: {g} (no entry of {} expects it)",
                    self.file
                ));
            }
        }
        for e in &self.unexpected_passes {
            out.push(format!(
                "unexpected pass: {} passed, but {}:{} expects it to fail ({}): remove the entry",
                e.id, self.file, e.line, e.reason
            ));
        }
        out
    }
}

#[cfg(test)]
#[path = "baseline_tests.rs"]
mod tests;
