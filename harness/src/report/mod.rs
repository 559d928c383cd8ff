//! The gate record (SPEC §6): JSON for machines, Markdown for people, JUnit XML for CI systems.
//! Verdicts and evidence are stable; times and rates live apart, in `volatile`, so `check` can
//! compare a fresh run with the committed record.

pub mod badge;
pub mod baseline;
mod compare;
mod count;
pub mod diff;
mod files;
pub mod grid;
pub mod header;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod matrix;
pub mod output;
pub mod schema;
pub mod shares;
pub mod spelling;
pub mod summary;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gates::{GateOutcome, Verdict};
pub use count::Count;
pub use header::{ConnectorName, Header};

/// The record's schema name; bumped when a field changes meaning.
pub const SCHEMA: &str = "emq-gate-record/2";

/// One gate's verdict and stable evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GateVerdict {
    pub id: crate::gates::GateId,
    pub name: String,
    pub verdict: Verdict,
    pub evidence: Vec<crate::gates::Evidence>,
    /// Per-case verdicts of a gate made of cases (G6), in order; absent for the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<CaseVerdict>,
    /// For a gate that did not pass: the one command line that judges it again as this run did
    /// (`cmd::reproduce`). Never compared: it names paths of the machine that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
    /// For G6: where this run wrote the failing cases' YAML, and the files (`--cases` of the
    /// reproduce line). Never compared, like `reproduce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_cases: Option<String>,
}

/// One case's verdict (stable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CaseVerdict {
    pub id: String,
    pub verdict: Verdict,
    /// The first line of why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl GateVerdict {
    /// The first violation (`FAIL:` or `ERROR:` evidence), first line only, without its prefix.
    pub fn first_violation(&self) -> Option<String> {
        self.evidence
            .iter()
            .find(|e| e.severity.is_violation())
            .map(|e| e.headline().to_string())
    }
}

/// The last thing written: a record without it was truncated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Footer {
    pub passed: usize,
    /// The gates judged (and any missing): 8 for a full run; the gates NOT RUN are not counted.
    pub total: usize,
    /// `PASS n/8`; a partial run says what it left out: `PASS 1/1 (7 not run)`.
    pub summary: String,
    /// Volatile: when the run ended.
    pub ended: String,
}

/// Times and rates: recorded, never compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Volatile {
    pub engine_boot_ms: u64,
    pub gate_wall_ms: BTreeMap<String, u64>,
    /// Of each gate's wall time, how much it spent waiting on purpose (held replies, windows,
    /// settles); the rest is work.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gate_wait_ms: BTreeMap<String, u64>,
    /// Per-case wall times of G6, by case id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub case_wall_ms: BTreeMap<String, u64>,
    pub figures: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    /// Connector processes the run started, by gate and reason; absent for the in-process
    /// reference, which starts none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_starts: Option<crate::connector::starts::Starts>,
    /// The lanes the gates ran in, each on an engine of its own, all at once (`G2 G3 G4 G5`);
    /// absent in a record made before lanes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<String>,
    /// From the first engine's boot to the last gate's verdict: the run's wall time.
    #[serde(default)]
    pub gates_wall_ms: u64,
}

/// A whole record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Record {
    pub header: Header,
    pub gates: Vec<GateVerdict>,
    pub volatile: Volatile,
    /// What `--baseline` made of the run: which failures were expected, which are new, which
    /// entries passed. Absent without one (and in every record made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<baseline::BaselineOutcome>,
    pub footer: Footer,
}

/// Now as RFC 3339 UTC, from the system clock (no time crate needed for one format).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Record {
    /// Assembles a record from the gates' outcomes.
    pub fn new(header: Header, outcomes: &[GateOutcome], engine_boot_ms: u64) -> Self {
        let count = Count::of(outcomes.iter().map(|o| (o.id, o.verdict)));
        let mut volatile = Volatile {
            engine_boot_ms,
            ..Volatile::default()
        };
        for o in outcomes {
            volatile
                .gate_wall_ms
                .insert(o.id.to_string(), o.wall.as_millis() as u64);
            volatile
                .gate_wait_ms
                .insert(o.id.to_string(), o.waited.as_millis() as u64);
            if !o.figures.is_empty() {
                volatile.figures.insert(o.id.to_string(), o.figures.clone());
            }
            for c in &o.cases {
                volatile
                    .case_wall_ms
                    .insert(c.id.clone(), c.wall.as_millis() as u64);
            }
        }
        Self {
            header,
            gates: outcomes
                .iter()
                .map(|o| GateVerdict {
                    id: o.id,
                    name: o.name.clone(),
                    verdict: o.verdict,
                    evidence: o.evidence.clone(),
                    cases: o
                        .cases
                        .iter()
                        .map(|c| CaseVerdict {
                            id: c.id.clone(),
                            verdict: c.verdict,
                            message: c.message.clone(),
                        })
                        .collect(),
                    reproduce: None,
                    failed_cases: None,
                })
                .collect(),
            volatile,
            baseline: None,
            footer: Footer {
                passed: count.passed,
                total: count.total,
                summary: count.headline(),
                ended: now_rfc3339(),
            },
        }
    }

    /// True when the run passed: every gate it ran passed, and no gate is missing.
    pub fn passed(&self) -> bool {
        self.verdict() == Verdict::Pass
    }

    /// The run's one verdict, on the gates it ran ([`Count::verdict`]).
    pub fn verdict(&self) -> Verdict {
        self.count().verdict()
    }

    /// How its gates came out: passed, judged, not run, missing.
    pub fn count(&self) -> Count {
        Count::of(self.gates.iter().map(|g| (g.id, g.verdict)))
    }

    /// The gates left out of this run (NOT RUN).
    pub fn not_run(&self) -> Vec<crate::gates::GateId> {
        self.gates
            .iter()
            .filter(|g| !g.verdict.was_run())
            .map(|g| g.id)
            .collect()
    }
}

#[cfg(test)]
mod tests;
