//! How a child connector's failures are worded: durations, exit statuses, quoted lines.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

/// How much of a bad line an error message quotes.
pub(super) const QUOTE_CHARS: usize = 200;

/// `10 s`, `1.5 s`, `0.25 s`.
pub(super) fn secs(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        let s = format!("{:.3}", d.as_secs_f64());
        format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// `exited with status 3`, `was killed by signal 11`.
pub(super) fn ended(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => format!("ended ({s})"),
    }
}

pub(super) fn quote(line: &str) -> String {
    let mut q: String = line.chars().take(QUOTE_CHARS).collect();
    if line.chars().nth(QUOTE_CHARS).is_some() {
        q.push_str("...");
    }
    q
}
