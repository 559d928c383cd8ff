//! Everything `emq-gate` shows people: progress on stderr, records on stdout, one-line errors.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::gates::GateOutcome;

static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences progress (CI); results and errors still print.
pub fn set_quiet(q: bool) {
    QUIET.store(q, Ordering::SeqCst);
}

/// Progress lines with the time since `start`.
pub struct Progress {
    start: Instant,
    /// False: only gate verdicts and cell lines show (a matrix's inner runs).
    lines: bool,
}

impl Progress {
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            lines: true,
        }
    }

    /// A progress that shows gate verdicts but not the lines within a gate (for a matrix's cells).
    pub fn verdicts_only(&self) -> Self {
        Self {
            start: self.start,
            lines: false,
        }
    }

    /// One progress line on stderr (unless quiet).
    pub fn line(&self, msg: &str) {
        if self.lines {
            self.always(msg);
        }
    }

    /// A line even from a verdicts-only progress (unless quiet).
    pub fn always(&self, msg: &str) {
        if !QUIET.load(Ordering::SeqCst) {
            let _ = writeln!(
                std::io::stderr(),
                "[{:>7.1}s] {msg}",
                self.start.elapsed().as_secs_f64()
            );
        }
    }

    /// A gate's verdict as it lands.
    pub fn gate(&self, o: &GateOutcome) {
        let first = o
            .evidence
            .iter()
            .find(|e| e.severity.is_violation())
            .or(o.evidence.last())
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut first = first.lines().next().unwrap_or("").to_string();
        // A failed call's own words are a figure (they name ports and clocks, so the record's
        // line keeps the kind only): the person watching gets them on the gate's line.
        if o.verdict != crate::gates::Verdict::Pass
            && let Some(said) = o
                .figures
                .iter()
                .find(|(k, v)| k.ends_with("_error") && v.is_string())
                .and_then(|(_, v)| v.as_str())
        {
            first.push_str(&format!(": {}", said.lines().next().unwrap_or("")));
        }
        self.always(&format!(
            "{} {:<14} {:<5} ({:.1}s) {first}",
            o.id,
            o.name,
            o.verdict.to_string(),
            o.wall.as_secs_f64()
        ));
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

/// The result people asked for, on stdout.
pub fn result(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
}

/// A one-line error on stderr.
pub fn error(msg: &dyn std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "emq-gate: error: {msg}");
}

/// A note on stderr (always shown: it explains a result).
pub fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "emq-gate: {msg}");
}

/// True when stdout is a terminal and `NO_COLOR` is unset or empty (<https://no-color.org>).
pub fn stdout_color() -> bool {
    use std::io::IsTerminal;
    crate::settings::color_allowed() && std::io::stdout().is_terminal()
}
