//! Whatever a connector does, its whole run ends with a verdict within [`BOUND`] (times
//! [`common::slowness`] on a shared machine), the harness's
//! memory stays under [`MEMORY`], and nothing is left running. Each connector here is the real
//! Python connector behind `fixtures/misbehave.py MODE` (one misbehaviour each), judged by the
//! built `emq-gate run` on a binary engine of its own; a hang on a verb is `hangs.rs`'s.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A whole run must be judged within this (issue: every connector judged in at most 180 s).
const BOUND: Duration = Duration::from_secs(180);
/// The harness's peak resident memory, whatever the connector writes.
const MEMORY_KB: u64 = 100 * 1024;
const PARALLEL: usize = 2;

struct Mode {
    name: &'static str,
    /// The exit code `emq-gate run` must give: 0 every gate passed, 1 a gate failed.
    code: i32,
    /// Words the record must hold.
    evidence: &'static str,
}

const MODES: [Mode; 5] = [
    Mode {
        name: "wrong-db",
        code: 1,
        evidence: "the one the connect url names",
    },
    Mode {
        name: "db-zero",
        code: 1,
        evidence: "the one the connect url names",
    },
    Mode {
        name: "huge-line",
        code: 1,
        evidence: "over the limit of 16777216 bytes",
    },
    Mode {
        name: "flood-stdout",
        code: 1,
        evidence: "a line nobody asked for",
    },
    Mode {
        name: "flood-stderr",
        code: 0,
        evidence: "PASS 8/8",
    },
];

struct Judged {
    mode: &'static str,
    code: Option<i32>,
    wall: Duration,
    /// [`BOUND`] scaled by the machine's slowness through the run.
    bound: Duration,
    peak_kb: u64,
    record: String,
    stderr: String,
    left: Vec<u32>,
}

/// `VmHWM` (peak resident set) of `pid`, in kB.
fn peak_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn marked(marker: &str) -> Vec<u32> {
    common::marked("EMQ_MISBEHAVE_TEST", marker)
}

/// `emq-gate` started as `cmd` says, its output read by the test and no input.
fn start(cmd: &mut Command) -> std::process::Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start emq-gate")
}

/// One mode's run, judged against [`BOUND`] scaled by how slow the machine ran meanwhile: the
/// mean of [`common::slowness`] sampled every 2 s through the run (a factor measured once at the
/// start missed the load that came after it: a neighbouring test's crew).
fn judge(mode: &'static str, python: &Path) -> Judged {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/misbehave.py");
    let marker = format!("{}-{mode}", std::process::id());
    let mut child = start(
        Command::new(env!("CARGO_BIN_EXE_emq-gate"))
            .args([
                // Every gate, with fewer histories: a misbehaviour shows on every call, and 32
                // histories reach every verb many times over.
                "--quiet",
                "run",
                "--engine",
                "binary",
                "--batch",
                "20000",
                "--histories",
                "32",
                "--",
            ])
            .arg("python3")
            .arg(&fixture)
            .arg(mode)
            .env("EMQ_PYTHON_CONNECTOR", python)
            .env("EMQ_MISBEHAVE_TEST", &marker)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
    );
    let pid = child.id();
    let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let (out, err) = (read(Box::new(out)), read(Box::new(err)));
    let t0 = Instant::now();
    let mut peak = 0;
    let mut slowness = vec![common::slowness()];
    let mut sampled = Instant::now();
    let bound = |s: &[f64]| BOUND.mul_f64(s.iter().sum::<f64>() / s.len() as f64);
    // The bound plus a margin: past it the run is killed, so the test itself never hangs.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if sampled.elapsed() > Duration::from_secs(2) {
            slowness.push(common::slowness());
            sampled = Instant::now();
        }
        if t0.elapsed() > bound(&slowness) + Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        peak = peak.max(peak_kb(pid).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(50));
    };
    let wall = t0.elapsed();
    // Give a group that is being torn down a moment.
    std::thread::sleep(Duration::from_millis(500));
    Judged {
        mode,
        code: status.and_then(|s| s.code()),
        wall,
        bound: bound(&slowness),
        peak_kb: peak,
        record: out.join().unwrap(),
        stderr: err.join().unwrap(),
        left: marked(&marker),
    }
}

#[test]
fn every_misbehaving_connector_is_judged_in_bounded_time_and_memory() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let queue = std::sync::Mutex::new(MODES.iter().map(|m| m.name).collect::<Vec<_>>());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL {
            s.spawn(|| {
                while let Some(mode) = queue.lock().unwrap().pop() {
                    let j = judge(mode, &python);
                    eprintln!(
                        "{:<13} exit {:?} in {:>5.1} s (bound {:.0?}), harness peak {} MB",
                        j.mode,
                        j.code,
                        j.wall.as_secs_f64(),
                        j.bound,
                        j.peak_kb / 1024
                    );
                    results.lock().unwrap().push(j);
                }
            });
        }
    });
    let mut bad = Vec::new();
    for j in results.into_inner().unwrap() {
        let m = MODES.iter().find(|m| m.name == j.mode).unwrap();
        let why = [
            (j.code != Some(m.code)).then(|| format!("exit {:?}, want {}", j.code, m.code)),
            (j.wall > j.bound)
                .then(|| format!("took {:.0} s, bound {:.0?}", j.wall.as_secs_f64(), j.bound)),
            (j.peak_kb > MEMORY_KB).then(|| format!("peak memory {} MB", j.peak_kb / 1024)),
            (!j.record.contains(m.evidence)).then(|| format!("no {:?} in the record", m.evidence)),
            (!j.left.is_empty()).then(|| format!("processes left running: {:?}", j.left)),
            j.stderr
                .contains("No such process")
                .then(|| "kill noise on stderr".to_string()),
        ];
        let why: Vec<String> = why.into_iter().flatten().collect();
        if !why.is_empty() {
            bad.push(format!(
                "{}: {}\n--- record ---\n{}\n--- stderr ---\n{}",
                j.mode,
                why.join("; "),
                j.record,
                j.stderr
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

/// A run ended by a signal (a CI timeout's SIGTERM) says so in one line even under `--quiet`,
/// with no other noise, and leaves no engine or connector behind.
#[test]
fn a_run_ended_by_a_signal_says_so_in_one_line() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let marker = format!("{}-signal", std::process::id());
    let child = start(
        Command::new(env!("CARGO_BIN_EXE_emq-gate"))
            .args(["--quiet", "run", "--engine", "binary", "--"])
            .arg(&python)
            .env("EMQ_MISBEHAVE_TEST", &marker),
    );
    let pid = child.id();
    // Well into the gates: the engine and the connector are running.
    std::thread::sleep(Duration::from_secs(4));
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("emq-gate: ended by a signal"),
        "{stderr}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(marked(&marker), Vec::<u32>::new(), "processes left running");
}

/// A run whose stderr has no reader any more (a cancelled CI job's log pipe) still ends on a
/// signal, with nothing left running: the handler once panicked writing its line there, after
/// which the run went on booting engines and outlived every later signal.
#[test]
fn a_run_whose_stderr_reader_is_gone_still_ends_on_a_signal() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let marker = format!("{}-signal-no-reader", std::process::id());
    let mut child = start(
        Command::new(env!("CARGO_BIN_EXE_emq-gate"))
            .args(["run", "--engine", "binary", "--"])
            .arg(&python)
            .env("EMQ_MISBEHAVE_TEST", &marker),
    );
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(2));
    // Nobody reads its output from now on: its next write meets a broken pipe.
    drop(child.stderr.take());
    drop(child.stdout.take());
    std::thread::sleep(Duration::from_secs(2));
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let t0 = Instant::now();
    let ended = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        // Bounded far past the handler's own 5 s wait for what it killed.
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(500));
    let left = marked(&marker);
    for p in &left {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    assert_eq!(
        ended.and_then(|s| s.code()),
        Some(130),
        "emq-gate did not end on SIGTERM within 30 s"
    );
    assert_eq!(left, Vec::<u32>::new(), "processes left running");
}
