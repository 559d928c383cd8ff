//! The child process itself: started in its own process group (registered for Ctrl-C cleanup),
//! with one thread per pipe so a silent or flooding child can never block the harness, a ring of
//! its last stderr lines, and kill/reap that leaves nothing running.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::ChildSpec;
use super::lines::{Line, Ring, STDOUT_BACKLOG, read_lines, read_log};
use crate::engine::cleanup::Guard;
use crate::error::HarnessError;

/// How long drop waits for the child to obey `stop` before killing it.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// One running process and its pipes.
pub(super) struct Running {
    child: Child,
    pub(super) pid: u32,
    /// Lines to write to the child's stdin; dropping it closes stdin (after the queued lines).
    pub(super) stdin: Option<Sender<Vec<u8>>>,
    /// Lines the child printed on stdout; disconnected at EOF.
    pub(super) stdout: Receiver<Line>,
    /// Signalled (by disconnection) when the stderr reader reaches EOF.
    stderr_done: Receiver<()>,
    /// Set once the exit status is known.
    pub(super) status: Option<ExitStatus>,
    /// When its first request was written, and when its first line came back: its start-up.
    first: Arc<FirstExchange>,
    _guard: Guard,
}

/// When a process's first request was written to it and its first line was read (each set once,
/// by the writer and reader threads), so its start-up is measured as it happened, not when the
/// harness got round to reading the answer (a spare's may wait unread).
#[derive(Default)]
struct FirstExchange {
    /// When the first request was written, if it was a `hello` (a gate's first `connect` can
    /// wait on the network, which is no start-up).
    sent: OnceLock<Option<Instant>>,
    answered: OnceLock<Instant>,
}

impl Running {
    pub(super) fn start(spec: &ChildSpec, ring: &Ring) -> Result<Self, HarnessError> {
        let Some((program, args)) = spec.argv.split_first() else {
            return Err(HarnessError::BadInput(
                "connector command is empty: give the program and its arguments".into(),
            ));
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(dir) = &spec.cwd {
            cmd.current_dir(dir);
        }
        let (mut child, guard) = crate::engine::cleanup::spawn(&mut cmd)
            .map_err(|e| HarnessError::io(format!("start connector {}", spec.argv.join(" ")), e))?;
        let pid = child.id();
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("stdin is piped"),
            child.stdout.take().expect("stdout is piped"),
            child.stderr.take().expect("stderr is piped"),
        );

        let (to_child, from_harness) = mpsc::channel::<Vec<u8>>();
        let (to_harness, from_child) = mpsc::sync_channel::<Line>(STDOUT_BACKLOG);
        let (stderr_tx, stderr_done) = mpsc::channel::<()>();
        let first = Arc::new(FirstExchange::default());
        let (sent, answered) = (first.clone(), first.clone());
        let spawned = thread::Builder::new()
            .name(format!("emq-child-{pid}-stdin"))
            .spawn(move || write_lines(stdin, from_harness, &sent.sent))
            .and_then(|_| {
                thread::Builder::new()
                    .name(format!("emq-child-{pid}-stdout"))
                    .spawn(move || read_lines(stdout, to_harness, &answered.answered))
            })
            .and_then(|_| {
                let ring = ring.clone();
                thread::Builder::new()
                    .name(format!("emq-child-{pid}-stderr"))
                    .spawn(move || {
                        read_log(stderr, &ring);
                        drop(stderr_tx);
                    })
            });
        let mut running = Self {
            child,
            pid,
            stdin: Some(to_child),
            stdout: from_child,
            stderr_done,
            status: None,
            first,
            _guard: guard,
        };
        if let Err(e) = spawned {
            running.kill();
            return Err(HarnessError::io("start a connector reader thread", e));
        }
        Ok(running)
    }

    /// How long the process took to answer its first request, when that was a `hello` (a
    /// spare's, sent as it started, or a gate's first): what starting this runtime costs on this
    /// machine now, which a wait on its exit scales to. `None` until it has answered one, or
    /// when its first request was another.
    pub(super) fn startup(&self) -> Option<Duration> {
        let sent = (*self.first.sent.get()?)?;
        Some(self.first.answered.get()?.saturating_duration_since(sent))
    }

    /// The exit status if the child has exited (reaping it), without waiting.
    pub(super) fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits up to `limit` for the child to exit.
    pub(super) fn wait_for_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_status() {
                return Some(s);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            thread::sleep((deadline - now).min(Duration::from_millis(10)));
        }
    }

    /// SIGKILL to the whole process group, then reap the leader. Idempotent.
    pub(super) fn kill(&mut self) {
        // The group may outlive its leader (grandchildren), so it is killed even after an exit.
        crate::engine::cleanup::kill_group(self.pid);
        if self.status.is_none() {
            // The leader directly too, in case `kill` is missing or failed: `wait` must not block.
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
        self.stdin = None;
    }

    /// Asks the child to `stop` (as request `seq`, the one after the last it was sent: SPEC's
    /// `stop` carries a `seq` like every request), waits up to [`STOP_GRACE`], then kills the
    /// group and reaps it.
    pub(super) fn stop(mut self, seq: u64) {
        if self.try_status().is_none() {
            if let Some(tx) = self.stdin.take() {
                let _ = tx.send(format!("{{\"seq\":{seq},\"cmd\":\"stop\"}}\n").into_bytes());
                // Dropping the sender closes stdin once the line is written: EOF also means stop.
            }
            self.wait_for_exit(STOP_GRACE);
        }
        self.kill();
    }

    /// Gives the stderr reader a moment to take the last lines of a child that ended.
    pub(super) fn settle_log(&self, limit: Duration) {
        let _ = self.stderr_done.recv_timeout(limit);
    }
}

fn write_lines(mut stdin: ChildStdin, lines: Receiver<Vec<u8>>, sent: &OnceLock<Option<Instant>>) {
    const HELLO: &[u8] = br#""cmd":"hello""#;
    for line in lines {
        // Before the write: the answer cannot precede it.
        sent.get_or_init(|| {
            line.windows(HELLO.len())
                .any(|w| w == HELLO)
                .then(Instant::now)
        });
        if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
            return; // the child closed stdin or died; the reader side reports it
        }
    }
}
