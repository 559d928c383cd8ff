//! R5.9, judged: on `stop` the connector sends no response and exits 0. The harness sends
//! `stop`, watches stdout and the exit within a bound the gate scales to what it measured, then
//! ends the process group whatever happened, so nothing is left running either way.

use std::process::ExitStatus;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use super::ChildConnector;
use super::process::{Line, Running};
use super::words::{ended, quote, secs};
use crate::connector::starts::StartReason;

/// The step of the watch loop: how long one look at stdout may block before the exit is
/// checked again.
const LOOK: Duration = Duration::from_millis(10);

/// What the child did after `stop`: the first line it printed, and its exit if it came in time.
#[derive(Debug)]
pub(super) struct AfterStop {
    pub(super) line: Option<String>,
    pub(super) status: Option<ExitStatus>,
}

/// The verdict on what the child did after `stop` within `within`: `Err` is one line of
/// evidence naming every way it broke R5.9.
pub(super) fn verdict(after: &AfterStop, within: Duration) -> Result<(), String> {
    let mut wrong = Vec::new();
    if let Some(line) = &after.line {
        wrong.push(format!("answered stop with {}", quote(line)));
    }
    match after.status {
        Some(s) if s.code() == Some(0) => {}
        Some(s) => wrong.push(format!("{} on stop", ended(s))),
        None => wrong.push(format!(
            "was still running {} after stop, and was killed",
            secs(within)
        )),
    }
    if wrong.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the connector {} (R5.9: on stop the connector sends no response and exits 0)",
        wrong.join(", and ")
    ))
}

/// Sends `stop`, closes stdin, and watches up to `within` for a line and the exit; then kills the
/// group (a connector's own children with it) and reads what stdout still held.
fn watch(mut p: Running, seq: u64, within: Duration) -> AfterStop {
    let deadline = Instant::now() + within;
    if let Some(tx) = p.stdin.take() {
        // A request like every other (R5.1: one per line, each with its `seq`).
        let _ = tx.send(format!("{{\"seq\":{seq},\"cmd\":\"stop\"}}\n").into_bytes());
    }
    let mut line: Option<Line> = None;
    loop {
        if p.try_status().is_some() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match p.stdout.recv_timeout(left.min(LOOK)) {
            Ok(l) => {
                line.get_or_insert(l);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                p.wait_for_exit(left);
                break;
            }
        }
    }
    let status = p.try_status();
    p.kill();
    // The group is gone, so stdout reaches its end at once; a line written just before the exit
    // may still be on its way through the reader.
    let drain = deadline
        .saturating_duration_since(Instant::now())
        .max(within / 10);
    while line.is_none() {
        match p.stdout.recv_timeout(drain) {
            Ok(l) => line = Some(l),
            Err(_) => break,
        }
    }
    AfterStop {
        line: line.map(|l| l.shown()),
        status,
    }
}

/// Stops `c`'s process and judges it (see [`crate::connector::Connector::stop`]). `None` when it
/// has no healthy process to stop: a dead connector was judged where it died.
pub(super) fn judged(c: &mut ChildConnector, within: Duration) -> Option<Result<(), String>> {
    if c.dead.is_some() {
        return None;
    }
    super::factory::settle(c).ok()?;
    let p = c.proc.take()?;
    c.sessions.clear();
    c.dead = Some("connector was stopped by the harness".into());
    c.death = Some(StartReason::Stopped);
    c.seq += 1;
    Some(verdict(&watch(p, c.seq, within), within))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn after(line: Option<&str>, status: Option<i32>) -> AfterStop {
        AfterStop {
            line: line.map(str::to_string),
            status: status.map(ExitStatus::from_raw),
        }
    }

    #[test]
    fn silence_and_exit_zero_is_the_only_pass() {
        let w = Duration::from_secs(2);
        assert!(verdict(&after(None, Some(0)), w).is_ok());
        let answered = verdict(&after(Some("{\"ok\":{}}"), Some(0)), w).unwrap_err();
        assert!(
            answered.contains("answered stop with {\"ok\":{}}"),
            "{answered}"
        );
        // A raw wait status: exit code 3 is 3 << 8.
        let three = verdict(&after(None, Some(3 << 8)), w).unwrap_err();
        assert!(three.contains("exited with status 3 on stop"), "{three}");
        let ran = verdict(&after(None, None), w).unwrap_err();
        assert!(ran.contains("still running 2 s after stop"), "{ran}");
        let both = verdict(&after(Some("x"), Some(3 << 8)), w).unwrap_err();
        assert!(
            both.contains("answered stop with x, and exited with status 3"),
            "{both}"
        );
        assert!(both.ends_with("exits 0)"), "{both}");
    }
}
