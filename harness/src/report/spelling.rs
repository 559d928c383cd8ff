//! How the record spells a verdict and a line of evidence: `PASS`/`FAIL`/`ERROR`/`NOT RUN` (the verdict's
//! `Display`, the one place the words are written: its JSON, its schema and the evidence
//! prefixes are made from it), and evidence as one line whose prefix (`FAIL: `, `ERROR: `, none
//! for a fact that held) is its severity. The one place a prefix is written, and the one place
//! it is read back (a record loaded from JSON).

use serde::{Deserialize, Serialize};

use crate::gates::{Evidence, Severity, Verdict};

impl Verdict {
    /// `PASS`, `FAIL`, `ERROR`, `NOT RUN`: the words, written here only.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Error => "ERROR",
            Self::NotRun => "NOT RUN",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown verdict {0:?}")]
pub struct UnknownVerdict(pub String);

impl std::str::FromStr for Verdict {
    type Err = UnknownVerdict;
    fn from_str(s: &str) -> Result<Self, UnknownVerdict> {
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownVerdict(s.to_string()))
    }
}

impl Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Verdict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Verdict {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Verdict".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let words: Vec<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
        schemars::json_schema!({
            "description": "PASS, FAIL, ERROR (could not be judged: the harness or the engine failed, or not built), or NOT RUN (left out of this run: --gates, --rerun-failed, --fail-fast; no verdict, not counted).",
            "type": "string",
            "enum": words,
        })
    }
}

/// The verdict a line of `severity` stands for (none for a fact that held).
fn verdict_of(severity: Severity) -> Option<Verdict> {
    match severity {
        Severity::Held => None,
        Severity::Fail => Some(Verdict::Fail),
        Severity::Error => Some(Verdict::Error),
    }
}

/// The line's prefix for `severity`: its verdict's word and `: ` (none for a fact that held).
pub fn prefix(severity: Severity) -> String {
    verdict_of(severity).map_or(String::new(), |v| format!("{v}: "))
}

/// The line as the record holds it: the prefix and the text.
impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", prefix(self.severity), self.text)
    }
}

impl Serialize for Evidence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A record's evidence line read back from JSON: the one place a prefix is read.
impl<'de> Deserialize<'de> for Evidence {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(parse(&String::deserialize(d)?))
    }
}

/// A record's line as evidence: its prefix read as its severity.
pub fn parse(line: &str) -> Evidence {
    for severity in [Severity::Fail, Severity::Error] {
        if let Some(text) = line.strip_prefix(&prefix(severity)) {
            return Evidence::new(severity, text);
        }
    }
    Evidence::held(line)
}

impl schemars::JsonSchema for Evidence {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Evidence".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut s = String::json_schema(g);
        s.insert(
            "description".into(),
            format!(
                "One line of evidence: a fact that held, or `{}` / `{}` and a violation.",
                prefix(Severity::Fail),
                prefix(Severity::Error)
            )
            .into(),
        );
        s
    }
}

/// Evidence as the record's lines, one per line of text.
pub fn lines(evidence: &[Evidence]) -> String {
    evidence
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_the_evidence_it_spells() {
        for e in [
            Evidence::held("held"),
            Evidence::new(Severity::Fail, "a violation"),
            Evidence::new(Severity::Error, "could not judge"),
        ] {
            assert_eq!(parse(&e.to_string()), e);
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<Evidence>(&json).unwrap(), e);
        }
        assert_eq!(
            Evidence::new(Severity::Fail, "x").to_string(),
            "FAIL: x".to_string()
        );
    }
}
