//! Nothing left running: every process and container the harness starts is registered here, and
//! a Ctrl-C (or SIGTERM) removes them all before the process exits.
//!
//! A SIGKILL gives no chance to clean up, so every engine also carries its owner: the harness's
//! pid, its start time (from `/proc/<pid>/stat`, so a reused pid is not mistaken for the owner)
//! and its pid namespace (so a harness in another container sharing `/tmp` or the Docker daemon
//! is never judged). A container carries them as labels (`org.echomq.owner-pid`, `-start`,
//! `-ns`); a binary engine as a file `<server pid>.json` in [`engines_dir`]. Before every engine
//! start, [`sweep`] removes the engines whose owner is gone.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

enum Resource {
    Pid(u32),
    Container(String),
}

static REGISTRY: Mutex<Vec<(u64, Resource)>> = Mutex::new(Vec::new());
static NEXT: Mutex<u64> = Mutex::new(0);
static HANDLER: Once = Once::new();
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Held (shared) from a spawn until its registration, and taken (exclusive) by the signal handler
/// before it removes anything: a process started in the instant a signal arrived was once left
/// running, spawned but not yet registered when the handler emptied the registry.
static SPAWNING: RwLock<()> = RwLock::new(());

/// True once Ctrl-C (or SIGTERM) arrived: the handler is removing everything and will end the
/// process with 130, so a caller that finishes meanwhile must not exit first and cut it short.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A registration; dropping it forgets the resource (its owner stopped it normally).
pub struct Guard(u64);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut r) = REGISTRY.lock() {
            r.retain(|(id, _)| *id != self.0);
        }
    }
}

fn register(res: Resource) -> Guard {
    install_handler();
    let id = {
        let mut n = NEXT.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        *n
    };
    REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, res));
    Guard(id)
}

/// Starts `cmd` and registers the child (or process group leader) to kill on Ctrl-C, as one step
/// the signal handler cannot cut in two.
pub fn spawn(cmd: &mut Command) -> std::io::Result<(std::process::Child, Guard)> {
    install_handler();
    let _spawning = SPAWNING.read().unwrap_or_else(|e| e.into_inner());
    let child = cmd.spawn()?;
    let guard = register(Resource::Pid(child.id()));
    Ok((child, guard))
}

/// Registers a container to remove on Ctrl-C.
pub fn register_container(id: &str) -> Guard {
    register(Resource::Container(id.to_string()))
}

/// SIGKILL to process group `pgid`; a group that is already gone is not an error (and says
/// nothing: the caller only wants it gone).
pub fn kill_group(pgid: u32) {
    if let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// SIGKILL to process `pid`, silently if it is gone.
pub fn kill_pid(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Removes everything registered: used by the signal handler. Returns how many there were.
/// Waits (a bounded while) until each killed process is gone, so that "removed" is true when
/// the handler says it.
pub fn remove_all() -> usize {
    let items: Vec<_> = std::mem::take(&mut *REGISTRY.lock().unwrap_or_else(|e| e.into_inner()));
    let n = items.len();
    let mut killed = Vec::new();
    for (_, res) in items {
        match res {
            Resource::Pid(pid) => {
                kill_group(pid);
                kill_pid(pid);
                killed.push(pid);
            }
            Resource::Container(id) => {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "-f", "-v", &id])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
    }
    // SIGKILL cannot be refused; the bound only covers a machine too busy to schedule the exit.
    let until = Instant::now() + Duration::from_secs(5);
    while killed.iter().any(|&pid| start_time(pid).is_some()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    n
}

/// Blocks SIGCHLD in this thread and every thread it starts from now on: call it first in
/// `main`. Why: the in-process connector reads its sockets with a timeout (`SO_RCVTIMEO`), and
/// Linux ends such a read with `EINTR` whenever a signal wakes the thread, even one whose action is
/// to be ignored (a socket read with a timeout is never restarted). The harness starts and reaps
/// engines and connector processes all the time, in parallel trials too, and each exit sends
/// SIGCHLD; a connector read that meets it failed with kind engine ("Interrupted system call"),
/// a false FAIL of the reference (seen in G5's held batch, a few trials in a hundred). Blocked,
/// SIGCHLD stays pending and wakes no one; `wait` does not need it, and a child starts with an
/// empty mask (std resets it at spawn).
pub fn quiet_child_exits() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    // Only fails for an invalid `how`: nothing to handle.
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

fn install_handler() {
    HANDLER.call_once(|| {
        // If another handler is installed (an embedding program's), leave theirs in place.
        let _ = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, Ordering::SeqCst);
            // Kept until the process exits: no spawn starts or goes unregistered after this.
            let _no_spawn = SPAWNING.write().unwrap_or_else(|e| e.into_inner());
            let n = remove_all();
            // Printed even under --quiet: a run that ends without a record must say why. Not
            // `eprintln!`: it panics when stderr's reader is gone (a cancelled CI job), and a
            // panic here ended this thread with the lock released, so later spawns went on and
            // the process outlived every later signal (seen: a matrix share kept booting engines).
            let _ = writeln!(
                std::io::stderr(),
                "emq-gate: ended by a signal (interrupt or terminate) before a verdict; {n} engines and connector processes removed"
            );
            std::process::exit(130);
        });
    });
}

/// Who started an engine: a process, told apart from a later one with the same pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Its start time, in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub start: u64,
    /// `<boot id>/<pid namespace>`: pids and start times mean something only within it.
    pub ns: String,
}

impl Owner {
    /// This process; `None` without `/proc` (then engines carry no owner and are never swept).
    pub fn me() -> Option<&'static Owner> {
        static ME: OnceLock<Option<Owner>> = OnceLock::new();
        ME.get_or_init(|| {
            let pid = std::process::id();
            Some(Owner {
                pid,
                start: start_time(pid)?,
                ns: namespace()?,
            })
        })
        .as_ref()
    }

    /// True unless the owner is known to be gone: same namespace as this process, and no process
    /// with its pid and start time runs (a zombie counts as gone).
    pub fn alive(&self) -> bool {
        match Owner::me() {
            Some(me) if me.ns == self.ns => start_time(self.pid) == Some(self.start),
            _ => true,
        }
    }
}

/// The start time of a running (not zombie) process.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ppid ...`: fields after the last ')' start at field 3; the start time is 22.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    if matches!(fields.first(), Some(&("Z" | "X"))) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

fn namespace() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some(format!("{}/{}", boot.trim(), ns.display()))
}

/// Where binary engines leave their owner files: `<temp dir>/emq-engines-<uid>`.
pub fn engines_dir() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    std::env::temp_dir().join(format!("emq-engines-{uid}"))
}

/// A binary engine's owner file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerRecord {
    pub server_pid: u32,
    /// The server's start time, so a reused pid is never killed.
    pub server_start: u64,
    pub port: u16,
    /// The server's temp dir, removed with it.
    pub dir: PathBuf,
    pub owner: Owner,
}

/// Writes the owner file of server `pid` (atomically); its path, to remove when the server stops.
/// `None` when there is no owner to record (no `/proc`) or the file cannot be written.
pub fn record_server(pid: u32, port: u16, dir: &Path) -> Option<PathBuf> {
    let rec = ServerRecord {
        server_pid: pid,
        server_start: start_time(pid)?,
        port,
        dir: dir.to_path_buf(),
        owner: Owner::me()?.clone(),
    };
    let engines = engines_dir();
    std::fs::create_dir_all(&engines).ok()?;
    let path = engines.join(format!("{pid}.json"));
    let tmp = engines.join(format!(".{pid}.json.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(&rec).ok()?).ok()?;
    std::fs::rename(&tmp, &path).ok()?;
    Some(path)
}

/// The Docker labels that name this process as a container's owner.
pub fn owner_labels() -> Vec<(&'static str, String)> {
    Owner::me().map_or_else(Vec::new, |o| {
        vec![
            ("org.echomq.owner-pid", o.pid.to_string()),
            ("org.echomq.owner-start", o.start.to_string()),
            ("org.echomq.owner-ns", o.ns.clone()),
        ]
    })
}

/// Removes the engines whose owner is gone: binary servers always, containers when `containers`
/// (Docker is asked only then). Returns one line saying what went, or `None` when nothing did.
pub fn sweep(containers: bool) -> Option<String> {
    let mut gone = sweep_servers();
    if containers {
        gone.extend(sweep_containers());
    }
    if gone.is_empty() {
        return None;
    }
    let n = gone.len();
    Some(format!(
        "removed {n} engine{} left by a harness that is gone: {}",
        if n == 1 { "" } else { "s" },
        gone.join(", ")
    ))
}

fn sweep_servers() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(engines_dir()) else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Some(rec) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<ServerRecord>(&b).ok())
        else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        if rec.owner.alive() {
            continue;
        }
        if start_time(rec.server_pid) == Some(rec.server_start) {
            kill_pid(rec.server_pid);
            // Not our child: whoever inherited it reaps it; wait until it no longer runs.
            let t0 = Instant::now();
            while start_time(rec.server_pid).is_some() && t0.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(10));
            }
            gone.push(format!(
                "valkey-server pid {} on port {} (owner pid {})",
                rec.server_pid, rec.port, rec.owner.pid
            ));
        }
        let named_ours = rec
            .dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("emq-valkey-"));
        if named_ours {
            let _ = std::fs::remove_dir_all(&rec.dir);
        }
        let _ = std::fs::remove_file(&path);
    }
    gone
}

fn sweep_containers() -> Vec<String> {
    let Ok(out) = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=org.echomq.owner-pid",
            "--format",
            "{{.ID}}\t{{.Label \"org.echomq.owner-pid\"}}\t{{.Label \"org.echomq.owner-start\"}}\t{{.Label \"org.echomq.owner-ns\"}}",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [id, pid, start, ns] = f[..] else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse(), start.parse()) else {
            continue;
        };
        let owner = Owner {
            pid,
            start,
            ns: ns.to_string(),
        };
        if owner.alive() {
            continue;
        }
        let removed = Command::new("docker")
            .args(["rm", "-f", "-v", id])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if removed {
            gone.push(format!("container {id} (owner pid {pid})"));
        }
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_is_not() {
        let me = Owner::me().expect("/proc");
        assert!(me.alive());
        let reused = Owner {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(
            !reused.alive(),
            "same pid, another start time: a reused pid"
        );
        let elsewhere = Owner {
            ns: "another/namespace".into(),
            start: 0,
            ..me.clone()
        };
        assert!(elsewhere.alive(), "another namespace is never judged");
    }
}
