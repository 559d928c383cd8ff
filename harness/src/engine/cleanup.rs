//! Nothing left running: every process and container the harness starts is registered here, and
//! a Ctrl-C (or SIGTERM) removes them all before the process exits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

enum Resource {
    Pid(u32),
    Container(String),
}

static REGISTRY: Mutex<Vec<(u64, Resource)>> = Mutex::new(Vec::new());
static NEXT: Mutex<u64> = Mutex::new(0);
static HANDLER: Once = Once::new();
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

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

/// Registers a child process (or process group leader) to kill on Ctrl-C.
pub fn register_pid(pid: u32) -> Guard {
    register(Resource::Pid(pid))
}

/// Registers a container to remove on Ctrl-C.
pub fn register_container(id: &str) -> Guard {
    register(Resource::Container(id.to_string()))
}

/// Removes everything registered: used by the signal handler.
pub fn remove_all() {
    let items: Vec<_> = std::mem::take(&mut *REGISTRY.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, res) in items {
        match res {
            Resource::Pid(pid) => {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .status();
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
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
}

fn install_handler() {
    HANDLER.call_once(|| {
        // If another handler is installed (an embedding program's), leave theirs in place.
        let _ = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, Ordering::SeqCst);
            remove_all();
            std::process::exit(130);
        });
    });
}
