//! R5.9, judged: on `stop` the connector sends no response and exits 0. The harness sends
//! `stop`, watches stdout and the exit within a bound the gate scales to what it measured (grown
//! by the time the process group waited for a CPU meanwhile, [`CpuWait`]), then ends the process
//! group whatever happened, so nothing is left running either way.

use std::process::ExitStatus;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use super::ChildConnector;
use super::cpu_wait::CpuWait;
use super::lines::Line;
use super::process::Running;
use super::words::{ended, quote, secs};
use crate::connector::starts::StartReason;

/// The step of the watch loop: how long one look at stdout may block before the exit is
/// checked again.
const LOOK: Duration = Duration::from_millis(10);

/// The most the bound grows to by the group's wait for a CPU, in bounds: a process that spins
/// on a starved machine accrues wait while it runs, and must still be ended.
const MOST_BOUNDS: u32 = 10;

/// What the child did after `stop`: the first line it printed, its exit if it came in time, and
/// how long the group waited for a CPU meanwhile (its bound grew by that).
#[derive(Debug)]
pub(super) struct AfterStop {
    pub(super) line: Option<String>,
    pub(super) status: Option<ExitStatus>,
    pub(super) starved: Duration,
}

/// The verdict on what the child did after `stop` within `within` (and the time it was starved
/// of a CPU): `Err` is one line of evidence naming every way it broke R5.9.
pub(super) fn verdict(after: &AfterStop, within: Duration) -> Result<(), String> {
    let mut wrong = Vec::new();
    if let Some(line) = &after.line {
        wrong.push(format!("answered stop with {}", quote(line)));
    }
    match after.status {
        Some(s) if s.code() == Some(0) => {}
        Some(s) => wrong.push(format!("{} on stop", ended(s))),
        None if after.starved.is_zero() => wrong.push(format!(
            "was still running {} after stop, and was killed",
            secs(within)
        )),
        None => wrong.push(format!(
            "was still running {} after stop ({} and the {} its processes waited for a CPU), \
             and was killed",
            secs(given(within, after.starved)),
            secs(within),
            secs(after.starved)
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

/// The time a process is given to exit: `within`, grown by the time it was starved of a CPU, at
/// most [`MOST_BOUNDS`] times `within`. Pure.
fn given(within: Duration, starved: Duration) -> Duration {
    (within + starved).min(within * MOST_BOUNDS)
}

/// Sends `stop`, closes stdin, and watches for a line and the exit up to `within`, grown by what
/// the group waited for a CPU (read again each time the bound is reached); then kills the group
/// (a connector's own children with it) and reads what stdout still held.
fn watch(mut p: Running, seq: u64, within: Duration) -> AfterStop {
    let t0 = Instant::now();
    let mut cpu = CpuWait::start(p.pid);
    let mut starved = Duration::ZERO;
    if let Some(tx) = p.stdin.take() {
        // A request like every other (R5.1: one per line, each with its `seq`).
        let _ = tx.send(format!("{{\"seq\":{seq},\"cmd\":\"stop\"}}\n").into_bytes());
    }
    let mut line: Option<Line> = None;
    let left = |starved| given(within, starved).saturating_sub(t0.elapsed());
    loop {
        if p.try_status().is_some() {
            break;
        }
        if left(starved).is_zero() {
            // Late only if it was late with the CPU it had: a ready process that had none waited.
            starved = cpu.waited();
            if left(starved).is_zero() {
                break;
            }
        }
        match p.stdout.recv_timeout(left(starved).min(LOOK)) {
            Ok(l) => {
                line.get_or_insert(l);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                p.wait_for_exit(left(starved));
            }
        }
    }
    let status = p.try_status();
    p.kill();
    // The group is gone, so stdout reaches its end at once; a line written just before the exit
    // may still be on its way through the reader.
    let drain = left(starved).max(within / 10);
    while line.is_none() {
        match p.stdout.recv_timeout(drain) {
            Ok(l) => line = Some(l),
            Err(_) => break,
        }
    }
    AfterStop {
        line: line.map(|l| l.shown()),
        status,
        starved,
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
            starved: Duration::ZERO,
        }
    }

    #[test]
    fn the_bound_grows_by_the_wait_for_a_cpu_up_to_ten_bounds() {
        let s = Duration::from_secs;
        assert_eq!(given(s(2), s(0)), s(2));
        assert_eq!(given(s(2), s(3)), s(5));
        assert_eq!(given(s(2), s(60)), s(20));
        let starved = AfterStop {
            starved: Duration::from_millis(1500),
            ..after(None, None)
        };
        let why = verdict(&starved, s(2)).unwrap_err();
        assert!(
            why.contains(
                "still running 3.5 s after stop (2 s and the 1.5 s its processes waited for a CPU)"
            ),
            "{why}"
        );
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
