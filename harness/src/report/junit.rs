//! The record as JUnit XML, for CI dashboards: one testcase per gate and one per G6 case, the
//! first violation as the failure message, the run's seed, engine and versions as properties.
//! Written with `quick-junit` (nextest's), which strips control characters and ANSI escapes.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::gates::Verdict;
use crate::report::Record;

fn status(verdict: Verdict, message: Option<String>, body: String) -> TestCaseStatus {
    let kind = match verdict {
        Verdict::Pass => return TestCaseStatus::success(),
        // Left out of the run: JUnit's own word for a test not run.
        Verdict::NotRun => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(message.unwrap_or_else(|| verdict.to_string()));
            return s;
        }
        Verdict::Fail => NonSuccessKind::Failure,
        Verdict::Error => NonSuccessKind::Error,
    };
    let mut s = TestCaseStatus::non_success(kind);
    s.set_message(message.unwrap_or_else(|| format!("{verdict}")));
    s.set_type(verdict.to_string());
    if !body.is_empty() {
        s.set_description(body);
    }
    s
}

impl Record {
    /// The test suite of this record (a matrix puts several in one report).
    pub fn junit_suite(&self) -> TestSuite {
        let h = &self.header;
        let mut suite = TestSuite::new(format!(
            "emq-gate {} on {}",
            h.connector_name,
            h.engine_label()
        ));
        let props = [
            ("seed", h.seed.to_string()),
            ("histories", h.histories.to_string()),
            ("batch", h.batch.to_string()),
            ("engine", h.engine_label()),
            ("engine_kind", h.engine_kind.clone()),
            ("engine_image", h.engine_image.clone()),
            ("engine_source", h.engine_source.clone()),
            ("connector", h.connector_name.to_string()),
            ("connector_version", h.connector_version.clone()),
            ("connector_language", h.connector_language.clone()),
            ("harness_version", h.harness_version.clone()),
            ("contract_version", h.contract().to_string()),
            (
                "catalogue_digest",
                h.catalogue_digest.clone().unwrap_or_default(),
            ),
            ("bundle_version", h.bundle_version.clone()),
            ("bundle_digest", h.bundle_digest.clone()),
            ("summary", self.footer.summary.clone()),
        ];
        suite.add_properties(props.into_iter().map(|(k, v)| Property::new(k, v)));
        let class = format!("emq-gate.{}", h.connector_name);
        let mut total_ms = 0;
        for g in &self.gates {
            let ms = self
                .volatile
                .gate_wall_ms
                .get(g.id.as_str())
                .copied()
                .unwrap_or(0);
            total_ms += ms;
            let mut case = TestCase::new(
                format!("{} {}", g.id, g.name),
                status(
                    g.verdict,
                    g.first_violation(),
                    crate::report::spelling::lines(&g.evidence)
                        + &g.reproduce
                            .as_ref()
                            .map_or(String::new(), |l| format!("\nreproduce: {l}")),
                ),
            );
            case.set_classname(class.clone())
                .set_time(Duration::from_millis(ms));
            suite.add_test_case(case);
            for c in &g.cases {
                let ms = self.volatile.case_wall_ms.get(&c.id).copied().unwrap_or(0);
                let mut case = TestCase::new(
                    format!("{} {}::{}", g.id, g.name, c.id),
                    status(c.verdict, c.message.clone(), String::new()),
                );
                case.set_classname(format!("{class}.{}", g.id))
                    .set_time(Duration::from_millis(ms));
                suite.add_test_case(case);
            }
        }
        suite.set_time(Duration::from_millis(total_ms));
        suite
    }

    /// JUnit XML of this record alone.
    pub fn junit(&self) -> String {
        let mut report = Report::new(format!("emq-gate {}", self.header.connector_name));
        report.add_test_suite(self.junit_suite());
        report.to_string().expect("JUnit serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        serde_json::from_str(include_str!("../../../reports/reference.json")).unwrap()
    }

    #[test]
    fn a_failure_carries_its_first_violation_and_no_control_characters() {
        let mut r = record();
        r.header.contract_version = Some(2);
        r.gates[2].verdict = Verdict::Fail;
        r.gates[2].evidence = vec![
            "a fact".into(),
            crate::gates::Evidence::new(
                crate::gates::Severity::Fail,
                "EVAL was sent\u{1b}[31m red \u{7} bell\u{0}",
            ),
            crate::gates::Evidence::new(crate::gates::Severity::Fail, "second"),
        ];
        r.gates[5].cases = vec![
            crate::report::CaseVerdict {
                id: "enqueue-basic".into(),
                verdict: Verdict::Pass,
                message: None,
            },
            crate::report::CaseVerdict {
                id: "claim-empty".into(),
                verdict: Verdict::Fail,
                message: Some("step 2: reply differs".into()),
            },
        ];
        let xml = r.junit();
        assert!(
            xml.contains("message=\"EVAL was sent red  bell\""),
            "first violation as the message:\n{xml}"
        );
        assert!(
            !xml.chars()
                .any(|c| c < ' ' && c != '\n' && c != '\t' && c != '\r')
        );
        assert!(xml.contains("name=\"G6 cases::enqueue-basic\""), "{xml}");
        assert!(xml.contains("name=\"G6 cases::claim-empty\""), "{xml}");
        assert!(xml.contains("message=\"step 2: reply differs\""), "{xml}");
        assert!(
            xml.contains("<property name=\"seed\" value=\"1\"/>")
                && xml.contains("<property name=\"contract_version\" value=\"2\"/>"),
            "{xml}"
        );
        assert!(xml.contains("tests=\"10\""), "8 gates and 2 cases:\n{xml}");
    }
}
