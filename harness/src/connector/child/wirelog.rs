//! `--wire-log FILE`: every request the harness sends a child connector and every line it answers,
//! as JSON lines with timestamps, appended (several connectors of one run share the file; each
//! line names its process):
//!
//! ```text
//! {"t_ms":1767225600123,"pid":4242,"dir":"send","line":{"seq":1,"cmd":"hello","protocol":1}}
//! {"t_ms":1767225600131,"pid":4242,"dir":"recv","line":{"seq":1,"ok":{...}}}
//! ```
//!
//! `line` is the JSON value exchanged, or a string when the connector printed something that is
//! not JSON.

use std::io::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// An open wire log; writes are best effort (a full disk does not fail the gate).
#[derive(Debug)]
pub(super) struct WireLog {
    file: std::fs::File,
}

impl WireLog {
    pub(super) fn open(path: &Path) -> Result<Self, crate::error::HarnessError> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(|file| Self { file })
            .map_err(|e| crate::error::HarnessError::io(format!("wire log {}", path.display()), e))
    }

    /// Appends one exchanged line; `dir` is `send` or `recv`.
    pub(super) fn line(&mut self, pid: Option<u32>, dir: &str, text: &[u8]) {
        let text = String::from_utf8_lossy(text);
        let text = text.trim_end_matches('\n');
        let line: Value =
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
        let t_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut out = json!({"t_ms": t_ms, "pid": pid, "dir": dir, "line": line}).to_string();
        out.push('\n');
        // One write per line: O_APPEND keeps lines of concurrent connectors whole.
        let _ = self.file.write_all(out.as_bytes());
    }
}
