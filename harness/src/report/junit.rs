//! The record as JUnit XML, for CI dashboards.

use crate::gates::Verdict;
use crate::report::Record;

impl Record {
    /// JUnit XML: one testcase per gate, for CI dashboards.
    pub fn junit(&self) -> String {
        fn esc(s: &str) -> String {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
        }
        let failures = self
            .gates
            .iter()
            .filter(|g| g.verdict == Verdict::Fail)
            .count();
        let errors = self
            .gates
            .iter()
            .filter(|g| g.verdict == Verdict::Error)
            .count();
        let mut s = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"emq-gate {}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\">\n",
            esc(&self.header.connector_name),
            self.gates.len()
        );
        for g in &self.gates {
            let ms = self.volatile.gate_wall_ms.get(&g.id).copied().unwrap_or(0);
            s.push_str(&format!(
                "  <testcase classname=\"emq-gate\" name=\"{} {}\" time=\"{:.3}\">",
                g.id,
                esc(&g.name),
                ms as f64 / 1000.0
            ));
            let body = esc(&g.evidence.join("\n"));
            match g.verdict {
                Verdict::Pass => {}
                Verdict::Fail => s.push_str(&format!(
                    "<failure message=\"gate failed\">{body}</failure>"
                )),
                Verdict::Error => {
                    s.push_str(&format!("<error message=\"not judged\">{body}</error>"))
                }
            }
            s.push_str("</testcase>\n");
        }
        s.push_str("</testsuite>\n");
        s
    }
}
