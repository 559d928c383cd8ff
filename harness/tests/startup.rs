//! A connector's start-up is paid once per need, not once per case or crash (issue #24): a
//! [`ChildFactory`] reuses the process of a connector dropped healthy (its sessions disconnected),
//! starts a new one only for a first, a side-by-side, a killed, a dead or a timed-out connector,
//! counts every start by gate and reason, and leaves nothing running when it is dropped.
//!
//! The whole gate runs against the Python connector behind `fixtures/sleepy_start.sh` (2 s of
//! start-up before it reads anything): it must PASS 8/8 with few starts. The wall time is printed,
//! not asserted.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use emq::cmd::run::{RunOptions, Subject, run};
use emq::connector::Verbs;
use emq::connector::child::{ChildFactory, ChildSpec};
use emq::connector::starts::{StartReason, Starts};
use emq::engine::{EngineChoice, EngineOptions};
use emq::error::ErrorKind;
use emq::gates::ConnectorFactory;
use emq::report::output::{Progress, set_quiet};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The Python connector behind the 2-second start-up, marked so its processes can be found.
fn sleepy(program: &Path, marker: &str) -> ChildSpec {
    ChildSpec::new([
        fixture("sleepy_start.sh").display().to_string(),
        program.display().to_string(),
    ])
    .with_env("EMQ_STARTUP_TEST", marker)
}

fn marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}-{nanos}", std::process::id())
}

fn marked(marker: &str) -> Vec<u32> {
    common::marked("EMQ_STARTUP_TEST", marker)
}

/// Waits up to 5 s for every marked process to end; the ones left.
fn left_running(marker: &str) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = marked(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The rule the issue sets: no more starts than the kills the gate caused on purpose plus one
/// per gate, and none for a death or a timeout.
fn within_budget(starts: &Starts, process_kills: u64, gates: u64) -> Result<(), String> {
    let bad: u64 = ["died", "timeout"]
        .iter()
        .filter_map(|r| starts.by_reason.get(*r))
        .sum();
    if bad > 0 {
        return Err(format!(
            "{bad} starts replaced a dead or hung connector: {starts:?}"
        ));
    }
    if starts.total > process_kills + gates {
        return Err(format!(
            "{} processes started, more than {process_kills} kills + {gates} gates: {}",
            starts.total,
            starts.describe()
        ));
    }
    Ok(())
}

#[test]
fn the_budget_refuses_a_start_per_case() {
    let mut ok = Starts::default();
    ok.note("run", StartReason::First);
    ok.note("G1", StartReason::Concurrent);
    for _ in 0..30 {
        ok.note("G8", StartReason::Killed);
    }
    assert_eq!(within_budget(&ok, 30, 8), Ok(()));
    // What the harness did before issue #24: a process per case that failed, per other crash.
    let mut before = ok.clone();
    for _ in 0..44 {
        before.note("G8", StartReason::Killed);
    }
    assert!(within_budget(&before, 30, 8).is_err());
    let mut died = ok;
    died.note("G6", StartReason::Died);
    assert!(within_budget(&died, 30, 8).is_err());
}

#[test]
fn a_connector_dropped_healthy_serves_the_next_one() {
    let Some(program) = common::python_connector() else {
        return;
    };
    let engine = common::binary_engine();
    let url = engine.url(3);
    let mark = marker();
    let f = ChildFactory::new(
        ChildSpec::new([program.display().to_string()]).with_env("EMQ_STARTUP_TEST", mark.as_str()),
    );
    let started = |f: &ChildFactory| f.starts().unwrap().total;
    {
        let mut a = f.make().unwrap();
        a.connect("s", url.as_str()).unwrap();
        a.connect("t", url.as_str()).unwrap();
        a.disconnect("t").unwrap();
        assert_eq!(a.pending_size("s", "q").unwrap(), 0);
    }
    assert_eq!((started(&f), f.idle()), (1, 1), "one start, back idle");
    let mut b = f.make().unwrap();
    assert_eq!(started(&f), 1, "the idle process served the next connector");
    // Its sessions were disconnected as it went back: the next connector holds none.
    let err = b.pending_size("s", "q").unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    // Side by side: a second process.
    let mut c = f.make().unwrap();
    c.hello().unwrap();
    assert_eq!(f.starts().unwrap().by_reason["concurrent"], 1);
    // Killed on purpose: its replacement is a new process, counted as such.
    assert!(b.kill());
    drop(b);
    let mut d = f.make().unwrap();
    d.hello().unwrap();
    let s = f.starts().unwrap();
    assert_eq!((s.total, s.by_reason["killed"]), (3, 1), "{s:?}");
    drop((c, d));
    assert_eq!(f.idle(), 2);
    drop(f);
    assert_eq!(left_running(&mark), Vec::<u32>::new(), "left running");
}

#[test]
fn spares_start_together_and_a_silent_one_times_out_on_hello() {
    let mark = marker();
    let quirky = |secs: &str| {
        ChildSpec::new([
            fixture("sleepy_start.sh").display().to_string(),
            "python3".into(),
            fixture("quirky.py").display().to_string(),
        ])
        .with_env("EMQ_SLEEPY_START", secs)
        .with_env("EMQ_STARTUP_TEST", mark.as_str())
    };
    let f = ChildFactory::new(quirky("1"));
    let t0 = Instant::now();
    f.warm(3, StartReason::Concurrent);
    assert_eq!(f.idle(), 3);
    let mut cs: Vec<_> = (0..3).map(|_| f.make().unwrap()).collect();
    for c in &mut cs {
        assert_eq!(c.hello().unwrap().name, "fake");
    }
    eprintln!(
        "3 spares of 1 s start-up each, ready in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(f.starts().unwrap().by_reason["concurrent"], 3);
    // Asked for again: the idle ones are enough, nothing starts.
    drop(cs);
    f.warm(3, StartReason::Concurrent);
    assert_eq!(f.starts().unwrap().total, 3);
    drop(f);

    // A spare that never answers its warm-up hello: the timeout names hello, like any timeout.
    let hang = ChildSpec::new([
        "python3".to_string(),
        fixture("hang_on.py").display().to_string(),
        "hello".into(),
        "python3".into(),
        fixture("quirky.py").display().to_string(),
    ])
    .with_timeout(Duration::from_secs(1))
    .with_env("EMQ_STARTUP_TEST", mark.as_str());
    let f = ChildFactory::new(hang);
    f.warm(1, StartReason::Concurrent);
    let mut c = f.make().unwrap();
    let err = c.claim("s", "q", 0).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Internal, "no answer to hello (seq 1) within 1 s")
    );
    assert!(f.timed_out().is_some());
    drop((c, f));
    assert_eq!(left_running(&mark), Vec::<u32>::new(), "left running");
}

/// The whole gate against a connector with a 2-second start-up: PASS 8/8, few starts.
#[test]
fn a_slow_starting_connector_passes_with_few_starts() {
    let Some(program) = common::python_connector() else {
        return;
    };
    set_quiet(true);
    let mark = marker();
    let opts = RunOptions {
        engine: EngineOptions {
            choice: EngineChoice::Binary,
            ..emq::cmd::cli::engine_options_from_env().expect("the EMQ_* environment")
        },
        subject: Subject::Child(sleepy(&program, &mark)),
        seed: 1,
        histories: 64,
        batch: 20_000,
        only: None,
        fail_fast: false,
        one_engine: true,
        dirs: emq::cmd::sources::Dirs::from_env(),
    };
    let t0 = Instant::now();
    let record = run(&opts, &Progress::new()).expect("the run");
    let starts = record
        .volatile
        .connector_starts
        .clone()
        .expect("a child connector's record counts its starts");
    eprintln!(
        "judged in {:.1} s; processes started: {}",
        t0.elapsed().as_secs_f64(),
        starts.describe()
    );
    let failed: Vec<String> = record
        .gates
        .iter()
        .filter(|g| g.verdict != emq::gates::Verdict::Pass)
        .map(|g| format!("{} {:?}: {:?}", g.id, g.verdict, g.first_violation()))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(record.footer.summary, "PASS 8/8");
    let kills = record.volatile.figures["G8"]["crash_process_kills"]
        .as_u64()
        .expect("G8 counts its process kills");
    let per_gate: u64 = record
        .volatile
        .figures
        .values()
        .filter_map(|f| f.get("connector_starts").and_then(|v| v.as_u64()))
        .sum();
    // Every gate's figure, plus the header's start, adds up to the run's total.
    assert_eq!(
        per_gate + starts.in_gate("run").values().sum::<u64>(),
        starts.total
    );
    // G8 starts the replacements of its planned kills as it begins (a loaded machine may get
    // through fewer kills than planned), and each lane after the first starts a process of its
    // own (`gates/lanes.rs`): neither is a start per case or per history.
    let replacements = starts.in_gate("G8").get("killed").copied().unwrap_or(0);
    let lanes = record.volatile.lanes.len().max(1) as u64;
    within_budget(&starts, kills.max(replacements), 8 + lanes - 1).unwrap();
    assert_eq!(left_running(&mark), Vec::<u32>::new(), "left running");
}

/// R5.9 lets a connector take three of its start-ups to exit: `stop_takes_its_time.py` starts in
/// 1.5 s and exits 2.5 s after `stop`, past the 2 s floor. G1 must pass it: a slow runtime's exit
/// on a busy machine is no false FAIL. (`stop_ignored.py`, which never exits, fails: tests/rules.rs.)
#[test]
fn a_connector_that_exits_within_three_start_ups_passes_g1() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let (code, text) = common::g1_of_fixture(&python, "stop_takes_its_time.py", "valkey-9.1");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("PASS 1/1 (7 not run)"), "{text}");
    // The bound came from the start-up (≥ 1.5 s, so ≥ 4.5 s), not from the requests: on a machine
    // slow enough that ten connects exceed 2.5 s the old bound would have passed it too.
    let figure = |name: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("G1 {name} ")))
            .unwrap_or_else(|| panic!("no figure {name}: {text}"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let (startup, within) = (figure("stop_startup_ms"), figure("stop_within_ms"));
    assert!(startup >= 1500, "start-up {startup} ms: {text}");
    assert!(
        within >= 3 * startup,
        "bound {within} ms, start-up {startup} ms"
    );
}

/// R5.9's bound grows by the time the connector's processes waited for a CPU after `stop`:
/// `stop_starved.py` needs 40 ms of CPU to exit and shares its one CPU with a hog of its own at a
/// higher priority, so it exits seconds late on the clock (past the 2 s floor and its start-ups)
/// while it waited nearly all that time. A busy machine's delay is not the connector's: G1 passes
/// it. (`stop_lingers.py`, asleep for 8 s, waits for no CPU and fails: tests/rules.rs.)
#[test]
fn a_connector_starved_of_the_cpu_at_stop_passes_g1() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    let (code, text) = common::g1_of_fixture_with(
        &python,
        "stop_starved.py",
        "valkey-9.1",
        &[("EMQ_TEST_STOP_CLOCK", clock.as_os_str())],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("PASS 1/1 (7 not run)"), "{text}");
    // The gate's own stop check is the one process that exited in its own time (the others were
    // stopped idle, ended after their 2 s): at least one exit was late past R5.9's bound as
    // written, so the pass came from the wait, not from a quick exit.
    let within: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("G1 stop_within_ms "))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no figure stop_within_ms: {text}"));
    let late: Vec<f64> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    assert!(
        late.iter().any(|&s| s * 1000.0 > within),
        "no exit later than the {within} ms bound: {late:?}"
    );
}
