//! A connector in any language, run as a child process speaking the wire protocol v1 (SPEC §5):
//! JSON lines on its stdin/stdout, free-form log on stderr.
//!
//! The child is judged, not trusted: every request has a timeout, and a non-JSON line, a wrong
//! `seq`, silence or an exit is caught, reported as kind `internal` in plain words, and marks the
//! connector dead so later calls fail fast. Nothing can make [`ChildConnector::call`] hang or panic.
//!
//! The timeout is [`ChildSpec::timeout`] (10 s unless `--timeout`), plus [`PER_COMMAND`] for
//! every command a `batch` or `pipeline_probe` asks for (see [`ChildSpec::timeout_for`]). A
//! connector that times out is killed at once, and a [`ChildFactory`] remembers it: until the
//! next [`ConnectorFactory::reset`] (the start of the next gate) every connector it made or makes
//! fails fast with that first timeout as the reason, so a hung connector costs one timeout per
//! gate, not one per step.
//!
//! The child runs in its own process group, registered with [`crate::engine::cleanup`] so a Ctrl-C
//! kills it. Dropping a connector of a [`ChildFactory`] that is still healthy disconnects its
//! sessions and keeps its process idle for the factory's next connector (see `factory`); dropping
//! any other sends `stop`, waits up to 2 s, then kills the whole group and reaps the child, so
//! nothing is left running.
//!
//! ```no_run
//! use emq::connector::Verbs;
//! use emq::connector::child::{ChildConnector, ChildSpec};
//!
//! let spec = ChildSpec::new(["emq-connector-py"]);
//! let mut c = ChildConnector::spawn(&spec).unwrap();
//! println!("{}", c.hello().unwrap().name);
//! ```

mod cpu_wait;
mod exchange;
mod factory;
mod held;
mod lines;
mod process;
mod spec;
mod stop;
mod wire;
mod wirelog;
mod words;

pub use factory::ChildFactory;
pub use spec::{ChildSpec, DEFAULT_MAX_RESTARTS, DEFAULT_TIMEOUT, LOG_LINES, PER_COMMAND};

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

pub use self::lines::MAX_LINE;
use self::lines::{Ring, push_line};
use self::process::Running;
use self::words::{ended, quote};
use crate::connector::starts::StartReason;
use crate::connector::{Connector, Reply, Request};
use crate::error::{ConnectorError, ErrorKind, HarnessError};

/// What the connectors of one [`ChildFactory`] share with it since its last reset: the first
/// timeout among them, and the time the harness held a node stopped (each request's timeout
/// grows by what of it fell inside the request, SPEC R5.8).
#[derive(Debug, Default)]
struct Common {
    hung: Option<String>,
    holds: held::Holds,
}

type SharedCommon = Arc<Mutex<Common>>;

fn common(shared: &SharedCommon) -> std::sync::MutexGuard<'_, Common> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn first_hang(shared: &SharedCommon) -> Option<String> {
    common(shared).hung.clone()
}

/// Why a connector of a factory whose connector timed out is dead.
fn hung_reason(first: &str) -> String {
    format!("a connector timed out earlier in this gate: {first}")
}

/// A connector in a child process. See the module docs.
pub struct ChildConnector {
    spec: ChildSpec,
    proc: Option<Running>,
    log: Ring,
    /// Shared with the factory that made it (and its siblings); its own otherwise.
    common: SharedCommon,
    seq: u64,
    /// The last request answered (`claim (seq 39)`): a line nobody asked for came after it.
    pub(super) answered: Option<String>,
    /// Why the connector is dead (every later call fails fast with it), if it is.
    dead: Option<String>,
    restarts: u32,
    max_restarts: u32,
    wire_log: Option<wirelog::WireLog>,
    /// The sessions the connector holds (from its successful `connect`/`disconnect` replies):
    /// what it must `disconnect` before its process can serve another connector.
    sessions: BTreeSet<String>,
    /// Why its process must not be reused, once it must not: what its replacement is counted as.
    death: Option<StartReason>,
    /// The factory it came from: a connector dropped healthy goes back there, idle.
    home: Option<Weak<factory::Shared>>,
    /// The `seq` of the `hello` a spare was sent as it started, while its answer is unread.
    probe: Option<u64>,
    /// When its process started, and how many started with it (see `factory::settle`).
    started: std::time::Instant,
    together: u32,
}

impl std::fmt::Debug for ChildConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildConnector")
            .field("argv", &self.spec.argv)
            .field("pid", &self.pid())
            .field("seq", &self.seq)
            .field("dead", &self.dead)
            .field("restarts", &self.restarts)
            .finish()
    }
}

impl ChildConnector {
    /// Starts the child. It is not spoken to yet: the first request is the caller's (`hello`).
    pub fn spawn(spec: &ChildSpec) -> Result<Self, HarnessError> {
        Self::spawn_sharing(spec, SharedCommon::default())
    }

    fn spawn_sharing(spec: &ChildSpec, common: SharedCommon) -> Result<Self, HarnessError> {
        let log: Ring = Arc::default();
        let wire_log = spec
            .wire_log
            .as_deref()
            .map(wirelog::WireLog::open)
            .transpose()?;
        let proc = Running::start(spec, &log)?;
        let mut c = Self::unstarted(spec, log, common);
        c.proc = Some(proc);
        c.wire_log = wire_log;
        Ok(c)
    }

    fn unstarted(spec: &ChildSpec, log: Ring, common: SharedCommon) -> Self {
        Self {
            wire_log: None,
            spec: spec.clone(),
            proc: None,
            log,
            common,
            seq: 0,
            answered: None,
            dead: None,
            restarts: 0,
            max_restarts: DEFAULT_MAX_RESTARTS,
            sessions: BTreeSet::new(),
            death: None,
            home: None,
            probe: None,
            started: std::time::Instant::now(),
            together: 1,
        }
    }

    /// A connector on a process that served another connector before (its sessions all
    /// disconnected) or was started ahead of need: no start-up to wait for.
    fn resume(spec: &ChildSpec, idle: factory::Idle, common: SharedCommon) -> Self {
        let mut c = Self::unstarted(spec, idle.log, common);
        c.proc = Some(idle.proc);
        c.seq = idle.seq;
        c.wire_log = idle.wire_log;
        c.probe = idle.probe;
        c.answered = idle.answered;
        c.started = idle.started;
        c.together = idle.together;
        c
    }

    /// Whether its process may serve another connector: alive, not killed, no timeout.
    fn reusable(&mut self) -> bool {
        self.dead.is_none()
            && first_hang(&self.common).is_none()
            && self.proc.as_mut().is_some_and(|p| p.try_status().is_none())
    }

    /// A connector that is never started, because `common` already holds a timeout: every call
    /// fails at once, naming that first timeout.
    fn stillborn(spec: &ChildSpec, common: SharedCommon, first: &str) -> Self {
        let mut c = Self::unstarted(spec, Ring::default(), common);
        c.dead = Some(hung_reason(first));
        c
    }

    /// Allows `n` restarts (default [`DEFAULT_MAX_RESTARTS`]).
    pub fn with_max_restarts(mut self, n: u32) -> Self {
        self.max_restarts = n;
        self
    }

    /// The spec it was started from.
    pub fn spec(&self) -> &ChildSpec {
        &self.spec
    }

    /// The pid of the running child (also its process group id); `None` once it is reaped.
    pub fn pid(&self) -> Option<u32> {
        self.proc
            .as_ref()
            .filter(|p| p.status.is_none())
            .map(|p| p.pid)
    }

    /// Why the connector is dead, if it is: every call fails fast with this until a restart.
    pub fn dead_reason(&self) -> Option<&str> {
        self.dead.as_deref()
    }

    /// How many times it was restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Kills the child (and its group) and starts a fresh one: sessions are gone, so the caller
    /// says `hello` and connects again. At most `max_restarts` times, then an error.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        if self.restarts >= self.max_restarts {
            return Err(HarnessError::BadInput(format!(
                "connector {} was restarted {} times already; giving up (limit {})",
                self.spec.program(),
                self.restarts,
                self.max_restarts
            )));
        }
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
        self.restarts += 1;
        self.sessions.clear();
        if let Some(home) = self.home.as_ref().and_then(Weak::upgrade) {
            home.note_start(StartReason::Restart);
        }
        push_line(
            &self.log,
            format!("[emq harness] restart {} of the connector", self.restarts),
        );
        match Running::start(&self.spec, &self.log) {
            Ok(p) => {
                self.proc = Some(p);
                self.dead = None;
                Ok(())
            }
            Err(e) => {
                self.dead = Some(format!("connector could not be restarted: {e}"));
                Err(e)
            }
        }
    }

    /// Marks the connector dead, kills what is left of the process, and returns the error.
    fn die(&mut self, message: String) -> ConnectorError {
        if let Some(p) = self.proc.as_mut() {
            p.kill();
            p.settle_log(Duration::from_millis(200));
        }
        self.dead = Some(message.clone());
        self.death.get_or_insert(StartReason::Died);
        ConnectorError::internal(message)
    }

    /// The child's stdout closed (or, with `stdin_closed`, its stdin) during `what`: it exited,
    /// or is about to, or broke the pipe while running.
    fn exited(&mut self, when: &str, stdin_closed: bool) -> ConnectorError {
        let Some(p) = self.proc.as_mut() else {
            return self.die(format!("connector is not running {when}"));
        };
        let status = p.wait_for_exit(Duration::from_secs(1));
        p.settle_log(Duration::from_millis(500));
        let mut msg = match status {
            Some(s) => format!("connector {} {when}", ended(s)),
            None if stdin_closed => format!("connector stopped reading its stdin {when}"),
            None => format!("connector closed its stdout {when}"),
        };
        let tail = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = tail.iter().rev().find(|l| !l.trim().is_empty()) {
            msg.push_str(&format!("; last stderr line: {}", quote(last)));
        }
        drop(tail);
        self.die(msg)
    }
}

impl Connector for ChildConnector {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        let reply = self.exchange(request);
        match (request, &reply) {
            (Request::Connect { session, .. }, Ok(_)) => {
                self.sessions.insert(session.clone());
            }
            // `invalid`: the connector does not know the session (R5.10), so it holds none.
            (Request::Disconnect { session }, Ok(_)) => {
                self.sessions.remove(session);
            }
            (Request::Disconnect { session }, Err(e)) if e.kind == ErrorKind::Invalid => {
                self.sessions.remove(session);
            }
            _ => {}
        }
        reply
    }

    /// SIGKILL to the whole process group; the child is reaped before this returns.
    fn kill(&mut self) -> bool {
        if let Some(p) = self.proc.as_mut() {
            p.kill();
            p.settle_log(Duration::from_millis(200));
        }
        if self.dead.is_none() {
            self.dead = Some("connector was killed by the harness".into());
            self.death = Some(StartReason::Killed);
        }
        true
    }

    fn last_seq(&self) -> Option<u64> {
        (self.seq > 0).then_some(self.seq)
    }

    fn stop(&mut self, within: Duration) -> Option<Result<(), String>> {
        stop::judged(self, within)
    }

    fn startup(&self) -> Option<Duration> {
        self.proc.as_ref()?.startup()
    }

    fn log_tail(&self) -> String {
        let r = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for line in r.iter() {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

impl Drop for ChildConnector {
    /// A connector of a factory goes back to it (see [`ChildFactory`]); any other is stopped.
    fn drop(&mut self) {
        match self.home.take().and_then(|h| h.upgrade()) {
            Some(home) => home.take_back(self),
            None => {
                if let Some(p) = self.proc.take() {
                    p.stop(self.seq + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
