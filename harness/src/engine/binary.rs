//! The binary engine: `valkey-server` on a free loopback port, in a temp dir, no persistence.
//! Its owner file (see [`crate::engine::cleanup`]) lets a later run remove it if this harness is
//! SIGKILLed.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::engine::acl::Users;
use crate::engine::cleanup::{Guard, record_server};
use crate::engine::server_flags;
use crate::error::HarnessError;
use crate::settings;

/// A running server; killed on drop. G8's unclean failover kills, stops and restarts a
/// cluster node through a shared reference ([`Running::signal`], [`Running::restart`]), so the
/// process and its registrations sit behind a lock.
pub struct Running {
    pub port: u16,
    process: std::sync::Mutex<Process>,
    _dir: tempfile::TempDir,
    /// How it was started, to start it again on the same port and directory.
    program: PathBuf,
    users: Users,
    extra: Vec<String>,
    mode: Mode,
}

/// What a process is started as.
#[derive(Debug, Clone)]
pub(crate) enum Mode {
    /// A data node: the run's users and the rest of [`server_flags`] on its command line.
    Server,
    /// A Sentinel (`--sentinel`), from `sentinel.conf` in its directory, written from this text
    /// before its first start only: Sentinel rewrites the file with what it learns (its primary,
    /// its peers) and a restart reads that back. Its users are in the file, not on the command
    /// line: the rewrite records them, and a user given twice stops a server at start.
    Sentinel(String),
}

/// The file a Sentinel reads and rewrites, in its directory.
const SENTINEL_CONF: &str = "sentinel.conf";

/// The server process and what registered it.
struct Process {
    child: Child,
    /// The owner file, removed when the server stops.
    record: Option<PathBuf>,
    _guard: Guard,
}

/// Finds `valkey-server`: the flag (clap's `--valkey-server`, which also reads
/// `EMQ_VALKEY_SERVER`: the variable has that one reader), `ci/provision`'s cache, then PATH.
pub fn locate(flag: Option<&Path>) -> Result<PathBuf, HarnessError> {
    if let Some(p) = flag {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(HarnessError::BadInput(format!(
                "--valkey-server {}: no such file",
                p.display()
            )))
        };
    }
    let mut candidates = Vec::new();
    if let Some(c) = settings::cache_dir() {
        candidates.push(
            c.join(crate::engine::version::BUILD_DIR)
                .join("bin/valkey-server"),
        );
    }
    candidates.extend(settings::on_path("valkey-server"));
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        HarnessError::Engine(
            "no valkey-server found: run ci/provision or set EMQ_VALKEY_SERVER".into(),
        )
    })
}

/// The ports engines listen on: below Linux's ephemeral range (32768–60999 by default). A node
/// that G8 kills and restarts must bind its ports again; in the ephemeral range an outgoing
/// connection of any process can take one meanwhile (a CI run lost a node so: "Failed listening
/// on port … (cluster)"), which no port picked here risks.
const ENGINE_PORTS: std::ops::RangeInclusive<u16> = 16384..=32767;

/// A port free now in [`ENGINE_PORTS`], tried from a start that differs by process and moment
/// (so side-by-side harnesses rarely try the same one first); the kernel's choice if none is.
pub(crate) fn free_port() -> Result<u16, HarnessError> {
    let (low, span) = (*ENGINE_PORTS.start(), ENGINE_PORTS.len() as u32);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id().wrapping_mul(2_654_435_761);
    for k in 0..span {
        let port = low + ((seed.wrapping_add(k.wrapping_mul(7919))) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    let l =
        TcpListener::bind("127.0.0.1:0").map_err(|e| HarnessError::io("bind a free port", e))?;
    Ok(l.local_addr()
        .map_err(|e| HarnessError::io("bind a free port", e))?
        .port())
}

/// Starts the server and waits until it answers.
pub fn start(path: &Path, users: &Users) -> Result<Running, HarnessError> {
    start_with(path, users, &[])
}

/// [`start`] with further server flags (a cluster node's).
pub fn start_with(path: &Path, users: &Users, extra: &[String]) -> Result<Running, HarnessError> {
    start_picking(path, users, &|| Ok(extra.to_vec()), None)
}

/// True when a server could not listen on a port it was given: another process took the port
/// between [`free_port`] and the server's own bind (a fault proxy's ephemeral port, say).
pub(crate) fn is_port_clash(e: &HarnessError) -> bool {
    matches!(e, HarnessError::ServerExited { last_line, .. }
        if last_line.contains("Failed listening on port")
            || last_line.contains("Address already in use"))
}

/// How many times a server is started afresh, on new ports, after a port clash.
const PORT_TRIES: u32 = 5;

/// Starts the server with `extra()` flags (asked again on each try, so a flag naming a port can
/// name a new one), on a fresh port, again after a port clash; with `tls`, on a TLS port only
/// (SPEC §10), with its certificate.
pub(crate) fn start_picking(
    path: &Path,
    users: &Users,
    extra: &dyn Fn() -> Result<Vec<String>, HarnessError>,
    tls: Option<&crate::tls::RunTls>,
) -> Result<Running, HarnessError> {
    start_as(path, users, extra, tls, &Mode::Server)
}

/// A Sentinel from the config text `conf` ([`Mode::Sentinel`]), on a fresh port; with `tls`, on
/// a TLS port only (SPEC §10), as a data node is.
pub(crate) fn start_sentinel(
    path: &Path,
    users: &Users,
    conf: String,
    tls: Option<&crate::tls::RunTls>,
) -> Result<Running, HarnessError> {
    start_as(path, users, &|| Ok(Vec::new()), tls, &Mode::Sentinel(conf))
}

fn start_as(
    path: &Path,
    users: &Users,
    extra: &dyn Fn() -> Result<Vec<String>, HarnessError>,
    tls: Option<&crate::tls::RunTls>,
    mode: &Mode,
) -> Result<Running, HarnessError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match start_once_at(path, users, &extra()?, tls, mode) {
            Err(e) if is_port_clash(&e) && tries < PORT_TRIES => continue,
            other => return other,
        }
    }
}

/// Starts a server that listens on a TLS port only (SPEC §10), with `tls`'s certificate.
pub fn start_tls(
    path: &Path,
    users: &Users,
    tls: &crate::tls::RunTls,
) -> Result<Running, HarnessError> {
    start_picking(path, users, &|| Ok(Vec::new()), Some(tls))
}

fn start_once_at(
    path: &Path,
    users: &Users,
    extra: &[String],
    tls: Option<&crate::tls::RunTls>,
    mode: &Mode,
) -> Result<Running, HarnessError> {
    let dir = tempfile::Builder::new()
        .prefix("emq-valkey-")
        .tempdir()
        .map_err(|e| HarnessError::io("temp dir", e))?;
    let port = free_port()?;
    // A TLS engine's flags come last: its `--port 0` wins over the plain port (SPEC §10), and a
    // restart keeps them.
    let mut extra = extra.to_vec();
    if let Some(t) = tls {
        extra.extend(t.server_flags(port));
    }
    if let Mode::Sentinel(conf) = mode {
        let file = dir.path().join(SENTINEL_CONF);
        std::fs::write(&file, conf)
            .map_err(|e| HarnessError::io(format!("write {}", file.display()), e))?;
    }
    let process = spawn(path, users, port, dir.path(), &extra, mode)?;
    let running = Running {
        port,
        process: std::sync::Mutex::new(process),
        _dir: dir,
        program: path.to_path_buf(),
        users: users.clone(),
        extra,
        mode: mode.clone(),
    };
    running.wait_listening()?;
    Ok(running)
}

fn spawn(
    path: &Path,
    users: &Users,
    port: u16,
    dir: &Path,
    extra: &[String],
    mode: &Mode,
) -> Result<Process, HarnessError> {
    let mut cmd = Command::new(path);
    match mode {
        // The config file must come first, before any flag.
        Mode::Sentinel(_) => cmd.arg(dir.join(SENTINEL_CONF)).arg("--sentinel").args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ]),
        Mode::Server => cmd
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(server_flags(users)),
    };
    cmd.args([
        "--dir",
        &dir.display().to_string(),
        "--logfile",
        "valkey.log",
    ])
    .args(extra)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let (child, guard) = crate::engine::cleanup::spawn(&mut cmd)
        .map_err(|e| HarnessError::io(format!("start {}", path.display()), e))?;
    Ok(Process {
        _guard: guard,
        record: record_server(child.id(), port, dir),
        child,
    })
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, Process> {
        self.process.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the server answers on its port; an exit first is its error.
    fn wait_listening(&self) -> Result<(), HarnessError> {
        let port = self.port;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            // Exited first: a port that answers may be another process's, not this server's.
            if let Ok(Some(status)) = self.lock().child.try_wait() {
                let log = std::fs::read_to_string(self._dir.path().join("valkey.log"))
                    .unwrap_or_default();
                return Err(HarnessError::ServerExited {
                    program: "valkey-server",
                    status: status.to_string(),
                    last_line: log.lines().last().unwrap_or("").to_string(),
                });
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // The server may have failed to bind another port (a cluster bus) and not exited
                // yet: it binds every port before it serves, so a moment is enough to say so.
                std::thread::sleep(Duration::from_millis(50));
                if let Ok(None) = self.lock().child.try_wait() {
                    return Ok(());
                }
                continue;
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(HarnessError::Engine(format!(
                    "valkey-server did not listen on port {port} within 20 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills the server (SIGKILL) and reaps it; its directory stays, for a restart.
    pub fn kill(&self) {
        let mut p = self.lock();
        // A stopped process dies of SIGKILL too.
        let _ = p.child.kill();
        let _ = p.child.wait();
        if let Some(path) = p.record.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Kills the server and reaps it.
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Sends `signal` to the server (`STOP`, `CONT`); a server already gone is not an error.
    pub fn signal(&self, signal: rustix::process::Signal) {
        if let Some(pid) = i32::try_from(self.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    /// Starts the server again, after [`Running::kill`], on its port and directory (a cluster
    /// node finds its `nodes.conf` there) with its flags and `more`, and waits until it answers.
    pub fn restart(&self, more: &[String]) -> Result<(), HarnessError> {
        self.kill();
        let mut flags = self.extra.clone();
        flags.extend_from_slice(more);
        let process = spawn(
            &self.program,
            &self.users,
            self.port,
            self._dir.path(),
            &flags,
            &self.mode,
        )?;
        *self.lock() = process;
        self.wait_listening()
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.lock().child.id()
    }

    /// The server's working directory (its log, a cluster node's config).
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }
}

#[cfg(test)]
mod port_tests {
    use super::*;

    #[test]
    fn an_engine_port_is_free_and_below_the_ephemeral_range() {
        let port = free_port().unwrap();
        assert!(ENGINE_PORTS.contains(&port), "{port}");
        TcpListener::bind(("127.0.0.1", port)).unwrap();
    }

    #[test]
    fn a_port_taken_by_another_process_is_a_clash_and_other_errors_are_not() {
        let exited = |last_line: &str| HarnessError::ServerExited {
            program: "valkey-server",
            status: "exit status: 1".into(),
            last_line: last_line.into(),
        };
        let clash = exited(
            "26703:M 01 Dec 2026 16:51:32.387 # Failed listening on port 41983 (cluster), aborting.",
        );
        assert!(is_port_clash(&clash));
        assert_eq!(
            clash.to_string(),
            "engine: valkey-server exited (exit status: 1): 26703:M 01 Dec 2026 16:51:32.387 # \
             Failed listening on port 41983 (cluster), aborting."
        );
        assert!(!is_port_clash(&exited("Bad directive")));
        assert!(!is_port_clash(&HarnessError::Engine(
            "Failed listening on port 1 in another message".into()
        )));
    }
}
