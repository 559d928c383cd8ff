//! One history on a live engine, judged by the model: every reply, then the final keyspace, with
//! engine-TIME brackets around every time-writing call; a history that ran until a short wait
//! could come due is run again at a larger time scale.

use std::time::{Duration, Instant};

use crate::connector::ConnectorFactory;
use crate::connector::{Connector, Request, Verbs};
use crate::engine::{Admin, Engine};
use crate::error::HarnessError;
use crate::suites::model::diff::{CallTime, Timing, diff_keyspace};
use crate::suites::model::history::{History, TimeScale, resolve_at};
use crate::suites::model::state::{Model, agrees, show, show_predicted, show_req};
/// Where histories run: the engine, the database they own, and fresh connectors.
pub struct Env<'a> {
    pub engine: &'a Engine,
    pub factory: &'a dyn ConnectorFactory,
    pub db: u32,
}

/// Why a history did not agree.
#[derive(Debug)]
pub enum Breach {
    /// The connector disagreed with the model (a verdict: FAIL).
    Mismatch(String),
    /// The harness or the engine failed (no verdict: ERROR).
    Harness(HarnessError),
    /// The history ran so long that a positive lease, backoff or delay could have come due, so the
    /// model (which holds them not due) cannot judge it; `span_ms` is how long it had run (engine
    /// ms). Never leaves [`run_history_timed`]: the history is re-run at a larger [`TimeScale`],
    /// and after [`VOID_TRIES`] such runs at [`TimeScale::MAX`] it is an ERROR.
    Void { why: String, span_ms: i64 },
}

/// How often a history is re-run at [`TimeScale::MAX`] when it lasted too long to be judged.
pub const VOID_TRIES: u32 = 3;

impl From<HarnessError> for Breach {
    fn from(e: HarnessError) -> Self {
        Self::Harness(e)
    }
}

/// Time-writing calls are kept this far apart (wall clock, reply to next send), so the engine
/// stamps them in distinct milliseconds and its score order is the model's tick order.
const TIME_GAP: Duration = Duration::from_micros(1100);

/// Runs one history on a fresh connector and a flushed database. `Ok(calls)` when every reply and
/// the final keyspace agree with the model.
pub fn run_history(env: &Env<'_>, admin: &mut Admin, h: &History) -> Result<u64, Breach> {
    run_history_at(env, admin, h, TimeScale::ONE)
}

/// [`run_history`] starting at time scale `scale` (a run's replays and shrinking start where its
/// drawn histories got to, so a slow machine does not pay the void runs again).
pub fn run_history_at(
    env: &Env<'_>,
    admin: &mut Admin,
    h: &History,
    scale: TimeScale,
) -> Result<u64, Breach> {
    let mut clock = ClockStats {
        scale,
        ..ClockStats::default()
    };
    run_history_timed(env, admin, &mut None, h, &mut clock)
}

/// What a run read of the engine's clock, over many histories.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockStats {
    /// The widest engine-time bracket of a time-writing call, ms.
    pub widest_bracket_ms: i64,
    /// Histories run again because they lasted until a positive lease, backoff or delay could
    /// have come due ([`Breach::Void`]).
    pub void_reruns: u64,
    /// The time scale histories run at now: raised by a void history, kept for the rest.
    pub scale: TimeScale,
}

/// [`run_history_on`], also keeping what it read of the engine's clock in `clock`.
pub fn run_history_timed(
    env: &Env<'_>,
    admin: &mut Admin,
    slot: &mut Option<Box<dyn Connector + Send>>,
    h: &History,
    clock: &mut ClockStats,
) -> Result<u64, Breach> {
    let mut tries = 0;
    loop {
        admin.flushdb()?;
        let mut con = match slot.take() {
            Some(c) => c,
            None => env.factory.make()?,
        };
        let mut timing = Timing::default();
        let result = judge(env, admin, &mut *con, h, clock.scale, &mut timing);
        clock.widest_bracket_ms = clock.widest_bracket_ms.max(timing.widest_ms);
        let calls = match result {
            Err(Breach::Void { why, span_ms }) => {
                clock.void_reruns += 1;
                if clock.scale < TimeScale::MAX {
                    clock.scale = clock.scale.after_void(span_ms);
                    continue;
                }
                tries += 1;
                if tries >= VOID_TRIES {
                    return Err(Breach::Harness(HarnessError::Engine(format!(
                        "{why}, in {VOID_TRIES} runs of one history at time scale {}× (short \
                         waits of {} ms, the stated bound): too slow to judge",
                        TimeScale::MAX.get(),
                        TimeScale::MAX.soon_ms()
                    ))));
                }
                continue;
            }
            other => other?,
        };
        for s in h.session_names() {
            con.disconnect(&s)
                .map_err(|e| Breach::Mismatch(format!("disconnect of session {s} failed: {e}")))?;
        }
        *slot = Some(con);
        return Ok(calls);
    }
}

/// Runs one history on the connector in `slot` (a fresh one when empty) and a flushed database.
/// On agreement the history's sessions are disconnected and the connector goes back into the slot
/// for the next history (a child process is not restarted per history); on any failure it is
/// dropped, so the next history starts fresh.
pub fn run_history_on(
    env: &Env<'_>,
    admin: &mut Admin,
    slot: &mut Option<Box<dyn Connector + Send>>,
    h: &History,
) -> Result<u64, Breach> {
    run_history_timed(env, admin, slot, h, &mut ClockStats::default())
}

/// `Err(Void)` when the engine's clock (`now`) has reached the earliest time a positive lease,
/// backoff or delay of this history could come due.
fn check_not_void(timing: &Timing, now: i64) -> Result<(), Breach> {
    match timing.earliest_due {
        Some(due) if now >= due => Err(Breach::Void {
            why: format!(
                "the history reached engine ms {now}, when a lease, backoff or delay it wrote \
                 could come due ({due}), and the model holds every positive one not due"
            ),
            span_ms: timing
                .calls
                .values()
                .map(|c| now - c.before)
                .max()
                .unwrap_or(0),
        }),
        _ => Ok(()),
    }
}

fn judge(
    env: &Env<'_>,
    admin: &mut Admin,
    con: &mut (dyn Connector + Send),
    h: &History,
    scale: TimeScale,
    timing: &mut Timing,
) -> Result<u64, Breach> {
    let url = env.engine.target(env.db);
    let mut model = Model::new();
    for s in h.session_names() {
        con.connect(&s, &url)
            .map_err(|e| Breach::Mismatch(format!("connect of session {s} failed: {e}")))?;
        let _ = model.apply(&Request::connect(s, &url));
    }
    // Ticks of recent time-writing calls and when their replies arrived.
    let mut recent: Vec<(u64, Instant)> = Vec::new();
    let n = h.calls.len();
    for (i, call) in h.calls.iter().enumerate() {
        let req = resolve_at(h, call, &model, scale);
        let want = model.apply(&req);
        let timed = model.wrote_time();
        if timed {
            space_out(&model, &mut recent);
        }
        let before = if timed {
            Some(admin.time_ms_earliest()?)
        } else {
            None
        };
        let got = con.call(&req);
        if let Some(before) = before {
            recent.push((model.tick(), Instant::now()));
            let after = admin.time_ms_latest()?;
            timing.widest_ms = timing.widest_ms.max(after - before);
            for (q, set, id) in model.written() {
                if let Some(s) = model.stamp_of(q, *set, id).filter(|s| s.ms > 0) {
                    let due = before + s.ms;
                    timing.earliest_due = Some(timing.earliest_due.map_or(due, |d| d.min(due)));
                }
            }
            timing.calls.insert(
                model.tick(),
                CallTime {
                    before,
                    after,
                    step: i + 1,
                    call: show_req(&req),
                },
            );
        }
        if !agrees(&want, &got) {
            check_not_void(timing, admin.time_ms_latest()?)?;
            return Err(Breach::Mismatch(format!(
                "step {} of {n}: {}: the model says {}, the connector said {}",
                i + 1,
                show_req(&req),
                show_predicted(&want),
                show(&got)
            )));
        }
    }
    let ks = admin.keyspace()?;
    check_not_void(timing, admin.time_ms_latest()?)?;
    let diffs = diff_keyspace(&model, &ks, timing);
    if !diffs.is_empty() {
        return Err(Breach::Mismatch(format!(
            "after all {n} steps the keyspace differs from the model: {}",
            diffs.join("; ")
        )));
    }
    Ok(n as u64)
}

/// Waits until no member the last model call wrote can share a server millisecond with a recently
/// stamped member of its set whose order against it would then flip (equal scores order by id;
/// the model orders by tick). Most calls need no wait: ids usually grow with time.
fn space_out(model: &Model, recent: &mut Vec<(u64, Instant)>) {
    let now = Instant::now();
    recent.retain(|(_, t)| now.duration_since(*t) < TIME_GAP);
    if recent.is_empty() {
        return;
    }
    let mut until: Option<Instant> = None;
    for (q, set, id) in model.written() {
        for tick in model.order_hazards(q, *set, id) {
            if let Some((_, t)) = recent.iter().find(|(k, _)| *k == tick) {
                let free = *t + TIME_GAP;
                until = Some(until.map_or(free, |u| u.max(free)));
            }
        }
    }
    if let Some(u) = until {
        let now = Instant::now();
        if u > now {
            std::thread::sleep(u - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suites::model::diff::tests::timing;

    #[test]
    fn a_history_that_reached_a_due_time_is_void() {
        let mut t = timing();
        assert!(check_not_void(&t, i64::MAX).is_ok());
        t.earliest_due = Some(1_750);
        assert!(check_not_void(&t, 1_749).is_ok());
        assert!(matches!(
            check_not_void(&t, 1_750),
            Err(Breach::Void { .. })
        ));
    }
}
