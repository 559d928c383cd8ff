//! [`ChildFactory`]: child connectors from one spec, with their processes kept for reuse.
//!
//! A process is started only where a gate needs a fresh one (issue #24): sessions and databases
//! already isolate cases and histories, so a connector dropped healthy (alive, not killed, no
//! timeout) disconnects every session it still holds and its process waits, idle, for the
//! factory's next [`ConnectorFactory::make`]. A process is started when none is idle: the first,
//! one a gate holds side by side with another, and the replacement of one that was killed on
//! purpose, died or timed out. Every start is counted, by gate and reason ([`Starts`]).
//!
//! A gate that will soon need several processes at once asks for them ahead
//! ([`ConnectorFactory::warm`]): they start together, so their start-ups overlap, and each is
//! sent `hello` at once, so the factory can tell a spare that is ready (it answered) from one
//! still starting; [`ConnectorFactory::make`] takes a process that served before first, then a
//! ready spare, then the spare started first. A spare's answer is read before its connector's
//! first request, and judged like any answer (a timeout, a broken line).
//!
//! The idle processes are stopped (`stop`, then the group killed) when the last clone of the
//! factory is dropped — at the end of a run — so nothing is left running.

use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lines::Ring;
use super::process::Running;
use super::words::{quote, secs};
use super::{ChildConnector, ChildSpec, SharedCommon, first_hang, wirelog};
use crate::connector::starts::{BEFORE_GATES, StartReason, Starts};
use crate::connector::{Connector, ConnectorFactory, Request, Verbs};
use crate::error::{ConnectorError, HarnessError};

/// An idle process: started, holding no session, waiting for a connector.
pub(super) struct Idle {
    pub(super) proc: Running,
    pub(super) log: Ring,
    /// The last `seq` sent to it: the next connector carries on from there.
    pub(super) seq: u64,
    pub(super) wire_log: Option<wirelog::WireLog>,
    /// The `seq` of the warm-up `hello` (a spare), while its answer is unread.
    pub(super) probe: Option<u64>,
    /// The last request it answered (`hello (seq 1)`), for a later line nobody asked for.
    pub(super) answered: Option<String>,
    /// When it started: of the spares still starting, the oldest is taken first.
    pub(super) started: Instant,
    /// How many processes started together with it (a spare; 1 otherwise): they share the CPU.
    pub(super) together: u32,
}

impl Idle {
    /// Whether it can answer at once: it served before, or it answered its warm-up `hello`.
    /// A spare whose answer is wrong is not ready, ever (its connector will say why).
    fn ready(&mut self) -> bool {
        let Some(seq) = self.probe else {
            return true;
        };
        match self.proc.stdout.try_recv() {
            Ok(line) => {
                let text = line.shown();
                if let Some(w) = self.wire_log.as_mut() {
                    w.line(Some(self.proc.pid), "recv", text.as_bytes());
                }
                match answers(&text, seq) {
                    Ok(()) => {
                        self.probe = None;
                        self.answered = Some(format!("hello (seq {seq})"));
                        true
                    }
                    Err(_) => {
                        self.proc.kill();
                        false
                    }
                }
            }
            Err(TryRecvError::Empty) => false,
            Err(TryRecvError::Disconnected) => false,
        }
    }
}

/// Whether `text` answers request `seq`: a JSON object with that `seq` and an `ok` or an `error`.
fn answers(text: &str, seq: u64) -> Result<(), String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m))
            if m.get("seq").and_then(Value::as_u64) == Some(seq)
                && (m.contains_key("ok") || m.contains_key("error")) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "connector answered its warm-up hello (seq {seq}) with {}",
            quote(text)
        )),
    }
}

/// What each process started together with a spare adds to the time its warm-up `hello` has,
/// counted from its start: spares share the CPU while they start (a runtime taking up to 1 s of
/// CPU to start, on a loaded machine, is not cut short because 30 others started with it).
pub const PER_SPARE: Duration = Duration::from_secs(1);

/// Reads a spare's answer to its warm-up `hello`, before its connector's first request: a
/// timeout or a broken answer is the connector's, as for any request. The answer has the base
/// timeout from now, or from the spare's start plus [`PER_SPARE`] for every other process
/// started with it, whichever ends later.
pub(super) fn settle(c: &mut ChildConnector) -> Result<(), ConnectorError> {
    let Some(seq) = c.probe.take() else {
        return Ok(());
    };
    let shared = c.spec.timeout + PER_SPARE.saturating_mul(c.together.saturating_sub(1));
    let timeout = c
        .spec
        .timeout
        .max(shared.saturating_sub(c.started.elapsed()));
    let Some(p) = c.proc.as_mut() else {
        return Ok(());
    };
    let pid = p.pid;
    match p.stdout.recv_timeout(timeout) {
        Ok(line) => {
            let text = line.shown();
            if let Some(w) = c.wire_log.as_mut() {
                w.line(Some(pid), "recv", text.as_bytes());
            }
            answers(&text, seq).map_err(|m| c.die(m))?;
            c.answered = Some(format!("hello (seq {seq})"));
            Ok(())
        }
        Err(RecvTimeoutError::Timeout) => {
            let message = format!("no answer to hello (seq {seq}) within {}", secs(timeout));
            super::common(&c.common)
                .hung
                .get_or_insert_with(|| message.clone());
            c.death = Some(StartReason::Timeout);
            Err(c.die(message))
        }
        Err(RecvTimeoutError::Disconnected) => {
            Err(c.exited(&format!("during hello (seq {seq})"), false))
        }
    }
}

/// What the factory counts: starts, the gate running, and the replacements owed.
#[derive(Default)]
struct Ledger {
    starts: Starts,
    gate: Option<String>,
    /// Why connectors of this factory ended unusable, oldest first: the next connector made is
    /// their replacement, and a process started for it is counted under that reason.
    owed: std::collections::VecDeque<StartReason>,
}

/// Shared by a factory, its clones and (weakly) the connectors it made.
pub(super) struct Shared {
    spec: ChildSpec,
    common: SharedCommon,
    /// Idle processes; the last one back is the first out (spares started ahead go below).
    idle: Mutex<Vec<Idle>>,
    ledger: Mutex<Ledger>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Counts one start in the gate running now.
    pub(super) fn note_start(&self, reason: StartReason) {
        let mut l = lock(&self.ledger);
        let gate = l.gate.clone().unwrap_or_else(|| BEFORE_GATES.into());
        l.starts.note(&gate, reason);
    }

    /// Takes a connector back: a healthy one disconnects its sessions and its process goes idle;
    /// any other is stopped, and its replacement is owed.
    pub(super) fn take_back(&self, c: &mut ChildConnector) {
        if c.reusable() {
            for s in std::mem::take(&mut c.sessions) {
                // `invalid` (the session is already gone) is fine; a timeout or a broken line
                // marks the connector dead, so it is not reused.
                let _ = c.disconnect(&s);
            }
        }
        if c.reusable()
            && c.sessions.is_empty()
            && let Some(proc) = c.proc.take()
        {
            lock(&self.idle).push(Idle {
                proc,
                log: c.log.clone(),
                seq: c.seq,
                wire_log: c.wire_log.take(),
                probe: None,
                answered: c.answered.take(),
                started: Instant::now(),
                together: 1,
            });
            return;
        }
        if let Some(p) = c.proc.take() {
            p.stop(c.seq + 1);
        }
        // A connector that never started (the factory had timed out) is no start owed.
        if let Some(why) = c.death.take() {
            lock(&self.ledger).owed.push_back(why);
        }
    }

    /// Starts a process, counted under `reason`.
    fn start(&self, reason: StartReason) -> Result<Idle, HarnessError> {
        let log = Ring::default();
        let wire_log = self
            .spec
            .wire_log
            .as_deref()
            .map(wirelog::WireLog::open)
            .transpose()?;
        let proc = Running::start(&self.spec, &log)?;
        self.note_start(reason);
        Ok(Idle {
            proc,
            log,
            seq: 0,
            wire_log,
            probe: None,
            answered: None,
            started: Instant::now(),
            together: 1,
        })
    }

    /// A spare: started and sent `hello` at once, so its answer tells when it is ready.
    fn spare(&self, reason: StartReason) -> Result<Idle, HarnessError> {
        let mut i = self.start(reason)?;
        let hello = Request::Hello { protocol: 1 };
        let mut line =
            serde_json::to_vec(&serde_json::json!({"seq": 1, "cmd": hello.cmd(), "protocol": 1}))
                .expect("JSON values serialize");
        line.push(b'\n');
        if let Some(w) = i.wire_log.as_mut() {
            w.line(Some(i.proc.pid), "send", &line);
        }
        if i.proc
            .stdin
            .as_ref()
            .is_some_and(|tx| tx.send(line).is_ok())
        {
            i.seq = 1;
            i.probe = Some(1);
        }
        Ok(i)
    }

    /// The idle process to serve next: the last one back that served before, else a spare that
    /// answered its `hello`, else the spare started first. Exited ones are dropped.
    fn idle_one(&self) -> Option<Idle> {
        let mut idle = lock(&self.idle);
        idle.retain_mut(|i| {
            let alive = i.proc.try_status().is_none();
            if !alive {
                i.proc.kill();
            }
            alive
        });
        let pick = idle
            .iter()
            .rposition(|i| i.probe.is_none())
            .or_else(|| idle.iter_mut().position(Idle::ready))
            .or_else(|| (0..idle.len()).min_by_key(|&k| idle[k].started))?;
        Some(idle.remove(pick))
    }
}

/// Stops processes all at once (each may take up to 2 s to obey `stop`), killing their groups.
fn stop_all(idle: Vec<Idle>) {
    std::thread::scope(|s| {
        for i in idle {
            s.spawn(move || i.proc.stop(i.seq + 1));
        }
    });
}

impl Drop for Shared {
    fn drop(&mut self) {
        stop_all(std::mem::take(&mut *lock(&self.idle)));
    }
}

/// Makes [`ChildConnector`]s from one spec, reusing idle processes (see the module docs).
///
/// It remembers the first timeout of any connector it made: from then until [`Self::reset`]
/// (which [`crate::gates::run_gate`] calls as each gate starts), every connector it made fails
/// its next call at once and every connector it makes is never started, both naming that
/// timeout. Clones share that memory, the idle processes and the count of starts.
#[derive(Clone)]
pub struct ChildFactory {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ChildFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildFactory")
            .field("spec", &self.shared.spec)
            .field("idle", &lock(&self.shared.idle).len())
            .field("starts", &lock(&self.shared.ledger).starts.total)
            .finish()
    }
}

impl ChildFactory {
    pub fn new(spec: ChildSpec) -> Self {
        Self {
            shared: Arc::new(Shared {
                spec,
                common: SharedCommon::default(),
                idle: Mutex::default(),
                ledger: Mutex::default(),
            }),
        }
    }

    /// The spec its connectors are started from.
    pub fn spec(&self) -> &ChildSpec {
        &self.shared.spec
    }

    /// How many processes wait idle now.
    pub fn idle(&self) -> usize {
        lock(&self.shared.idle).len()
    }

    /// Stops every idle process now (they are also stopped when the factory is dropped).
    pub fn drain(&self) {
        stop_all(std::mem::take(&mut *lock(&self.shared.idle)));
    }
}

impl ConnectorFactory for ChildFactory {
    fn make(&self) -> Result<Box<dyn Connector + Send>, HarnessError> {
        let sh = &self.shared;
        if let Some(first) = first_hang(&sh.common) {
            return Ok(Box::new(ChildConnector::stillborn(
                &sh.spec,
                sh.common.clone(),
                &first,
            )));
        }
        let owed = lock(&sh.ledger).owed.pop_front();
        let idle = match sh.idle_one() {
            Some(i) => i,
            None => {
                let first = lock(&sh.ledger).starts.total == 0;
                sh.start(owed.unwrap_or(if first {
                    StartReason::First
                } else {
                    StartReason::Concurrent
                }))?
            }
        };
        let mut c = ChildConnector::resume(&sh.spec, idle, sh.common.clone());
        c.home = Some(Arc::downgrade(sh));
        Ok(Box::new(c))
    }

    fn killable(&self) -> bool {
        true
    }

    /// Forgets the timeout and the holds, so the next gate starts its connectors afresh.
    fn reset(&self) {
        *super::common(&self.shared.common) = super::Common::default();
    }

    fn hold(&self, stopped: bool) {
        let mut c = super::common(&self.shared.common);
        let now = std::time::Instant::now();
        if stopped {
            c.holds.begin(now);
        } else {
            c.holds.end(now);
        }
    }

    fn timed_out(&self) -> Option<String> {
        first_hang(&self.shared.common)
    }

    fn enter(&self, gate: &str) {
        lock(&self.shared.ledger).gate = Some(gate.into());
    }

    /// Starts the missing processes at once as spares, below the idle ones.
    fn warm(&self, n: usize, reason: StartReason) {
        if first_hang(&self.shared.common).is_some() {
            return;
        }
        let missing = n.saturating_sub(self.idle());
        let together = u32::try_from(missing).unwrap_or(u32::MAX);
        for _ in 0..missing {
            match self.shared.spare(reason) {
                Ok(mut i) => {
                    i.together = together;
                    lock(&self.shared.idle).insert(0, i);
                }
                // `make` reports a start that fails, where a gate can say so.
                Err(_) => return,
            }
        }
    }

    fn starts(&self) -> Option<Starts> {
        Some(lock(&self.shared.ledger).starts.clone())
    }
}
