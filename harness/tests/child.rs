//! The child-process connector against real processes: misbehaving fake connectors (Python 3
//! scripts in `tests/fixtures/`) must each end in the exact error kind and message, within a bound,
//! with nothing left running; and the real Python connector must pass every verb on a live engine.
//!
//! Time bounds here are bounds on a hang (generous, so they never flake), not speed claims.

mod common;

use common::lifecycle::{error_kinds, lifecycle};
use common::{binary_engine, python_connector};
use std::path::Path;
use std::time::{Duration, Instant};

use emq::connector::child::{ChildConnector, ChildFactory, ChildSpec};
use emq::connector::{Connector, Verbs};

use emq::error::{ErrorKind, HarnessError};
use emq::gates::ConnectorFactory;
use emq::protocol::bundle::Bundle;

fn fixture(name: &str) -> ChildSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    ChildSpec::new(["python3".to_string(), path.display().to_string()])
        .with_env("PYTHONDONTWRITEBYTECODE", "1")
}

fn spawn(spec: &ChildSpec) -> ChildConnector {
    ChildConnector::spawn(spec).expect("spawn the fake connector")
}

/// The process exists and is not a zombie.
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // `pid (comm) S ...`: the state follows the last ')'.
            let state = stat.rsplit_once(')').map(|(_, r)| r.trim_start());
            !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
        }
        Err(_) => false,
    }
}

/// Our own child must be reaped, not merely dead: `/proc/<pid>` is gone.
fn assert_reaped(pid: u32) {
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "child {pid} still has a /proc entry (running or a zombie)"
    );
}

fn timed<T>(label: &str, bound: Duration, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    let took = t0.elapsed();
    eprintln!("timing: {label}: {took:?} (bound {bound:?})");
    assert!(took < bound, "{label} took {took:?}, bound {bound:?}");
    out
}

#[test]
fn hang_times_out_and_later_calls_fail_fast() {
    let mut c = spawn(&fixture("hang.py").with_timeout(Duration::from_secs(1)));
    let pid = c.pid().unwrap();
    // The 1 s timeout is for the request, not for Python's start on a busy machine.
    let up = Instant::now();
    while !c.log_tail().contains("hang.py: up") && up.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = timed(
        "hang: hello with a 1 s timeout",
        Duration::from_secs(3),
        || c.hello().unwrap_err(),
    );
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(err.message, "no answer to hello (seq 1) within 1 s");
    assert_reaped(pid);
    assert_eq!(c.pid(), None);
    let again = timed(
        "hang: the call after death",
        Duration::from_millis(500),
        || c.pending_size("s", "q").unwrap_err(),
    );
    assert_eq!(again.kind, ErrorKind::Internal);
    assert!(
        again
            .message
            .starts_with("connector is dead (no answer to hello (seq 1) within 1 s)"),
        "{}",
        again.message
    );
    assert!(
        c.log_tail().contains("hang.py: got a request"),
        "{}",
        c.log_tail()
    );
    timed("hang: drop after death", Duration::from_millis(500), || {
        drop(c)
    });
}

#[test]
fn drop_kills_a_child_that_ignores_stop() {
    let c = spawn(&fixture("hang.py"));
    let pid = c.pid().unwrap();
    // Make sure the child is up and reading before the stop line goes out.
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    timed(
        "hang: drop (stop ignored, 2 s grace, kill)",
        Duration::from_secs(5),
        || drop(c),
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(1900),
        "drop must wait for stop first"
    );
    assert_reaped(pid);
}

#[test]
fn garbage_line_is_reported_and_quoted_briefly() {
    let mut c = spawn(&fixture("garbage.py"));
    let pid = c.pid().unwrap();
    assert_eq!(c.hello().unwrap().name, "fake");
    let err = timed("garbage: pending_size", Duration::from_secs(3), || {
        c.pending_size("s", "q").unwrap_err()
    });
    assert_eq!(err.kind, ErrorKind::Internal);
    let quoted = err
        .message
        .strip_prefix(
            "connector printed a non-JSON line: Traceback (most recent call last): garbage",
        )
        .unwrap_or_else(|| panic!("{}", err.message));
    assert!(quoted.ends_with("..."), "{}", err.message);
    assert_eq!(
        err.message.len(),
        "connector printed a non-JSON line: ".len() + 200 + 3
    );
    assert_reaped(pid);
    assert!(c.dead_reason().is_some());
    assert!(
        c.hello()
            .unwrap_err()
            .message
            .starts_with("connector is dead")
    );
}

#[test]
fn wrong_seq_is_reported() {
    let mut c = spawn(&fixture("wrong_seq.py"));
    let pid = c.pid().unwrap();
    c.hello().unwrap();
    let err = timed("wrong_seq: claim", Duration::from_secs(3), || {
        c.claim("s", "q", 1000).unwrap_err()
    });
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.message,
        "connector answered seq 1 to request seq 2 (claim)"
    );
    assert_reaped(pid);
}

#[test]
fn exit_mid_run_is_reported_with_status_and_stderr() {
    let mut c = spawn(&fixture("exit_after_hello.py"));
    let pid = c.pid().unwrap();
    c.hello().unwrap();
    let err = timed("exit_after_hello: claim", Duration::from_secs(3), || {
        c.claim("s", "q", 1000).unwrap_err()
    });
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.message,
        "connector exited with status 3 during claim (seq 2); \
         last stderr line: exit_after_hello.py: fatal: cannot handle claim"
    );
    assert!(
        c.log_tail()
            .ends_with("exit_after_hello.py: fatal: cannot handle claim\n")
    );
    assert_reaped(pid);
    let again = timed(
        "exit_after_hello: call after exit",
        Duration::from_millis(500),
        || c.hello().unwrap_err(),
    );
    assert!(
        again
            .message
            .starts_with("connector is dead (connector exited with status 3")
    );
}

#[test]
fn slow_start_works_within_the_default_timeout() {
    let spec = fixture("slow_start.py");
    assert_eq!(spec.timeout, Duration::from_secs(10));
    let mut c = spawn(&spec);
    let pid = c.pid().unwrap();
    let t0 = Instant::now();
    let hello = timed("slow_start: hello", Duration::from_secs(8), || {
        c.hello().unwrap()
    });
    assert!(t0.elapsed() >= Duration::from_millis(1400));
    assert_eq!(hello.name, "fake");
    assert_eq!(c.pending_size("s", "q").unwrap(), 0);
    assert!(c.log_tail().contains("slow_start.py: ready"));
    // It obeys stop, so drop does not need the 2 s grace.
    timed(
        "slow_start: drop (stop obeyed)",
        Duration::from_millis(1500),
        || drop(c),
    );
    assert_reaped(pid);
}

#[test]
fn stderr_flood_then_death_keeps_the_last_lines() {
    let mut c = spawn(&fixture("flood_stderr.py"));
    let pid = c.pid().unwrap();
    c.hello().unwrap();
    let err = timed("flood_stderr: claim", Duration::from_secs(5), || {
        c.claim("s", "q", 1000).unwrap_err()
    });
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.message,
        "connector exited with status 7 during claim (seq 2); \
         last stderr line: flood_stderr.py: last words before dying"
    );
    let tail = c.log_tail();
    let lines: Vec<&str> = tail.lines().collect();
    assert_eq!(
        lines.len(),
        emq::connector::child::LOG_LINES,
        "bounded ring"
    );
    assert_eq!(
        lines.last(),
        Some(&"flood_stderr.py: last words before dying")
    );
    assert_eq!(lines[lines.len() - 2], "noise line 4999");
    assert_eq!(lines[0], "noise line 4801");
    assert_reaped(pid);
}

#[test]
fn values_and_errors_of_a_live_connector_are_told_apart() {
    let mut c = spawn(&fixture("quirky.py"));
    let pid = c.pid().unwrap();
    c.hello().unwrap();

    // A wrong-shaped ok value is internal, names the request and the value, and is not fatal.
    let err = c.pending_size("s", "q").unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.message.starts_with(
            "connector answered pending_size (seq 2) with a value of the wrong shape: \"lots\" ("
        ),
        "{}",
        err.message
    );
    // The connector's own errors pass through with their kind and message.
    let err = c.claim("s", "q", -1).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Invalid, "lease_ms must be >= 0")
    );
    let err = c.enqueue("s", "q", "p", 0).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Unsupported, "no enqueue")
    );
    // Errors that break the error format are internal, still not fatal.
    let err = c.reap("s", "q", 1, 1).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.message,
        "connector answered reap (seq 5) with an unknown error kind \"cosmic\": rays"
    );
    let err = c.browse("s", "q", 0, 1).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(err.message.contains("malformed error"), "{}", err.message);
    assert!(c.dead_reason().is_none());
    assert_eq!(c.hello().unwrap().name, "fake");
    timed(
        "quirky: drop (stop obeyed)",
        Duration::from_millis(1500),
        || drop(c),
    );
    assert_reaped(pid);
}

#[test]
fn drop_removes_the_whole_process_group() {
    let mut c = spawn(&fixture("grandchild.py"));
    let pid = c.pid().unwrap();
    let name = c.hello().unwrap().name;
    let grandchild: u32 = name.strip_prefix("grandchild:").unwrap().parse().unwrap();
    assert!(running(grandchild), "the grandchild runs before drop");
    timed("grandchild: drop", Duration::from_millis(1500), || drop(c));
    assert_reaped(pid);
    // Not our child, so it may linger as a zombie until init reaps it; it must not run.
    let t0 = Instant::now();
    while running(grandchild) && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !running(grandchild),
        "grandchild {grandchild} survived the drop"
    );
}

#[test]
fn kill_is_immediate_and_final() {
    let mut c = spawn(&fixture("quirky.py"));
    let pid = c.pid().unwrap();
    c.hello().unwrap();
    assert!(timed("quirky: kill", Duration::from_secs(1), || c.kill()));
    assert_reaped(pid);
    let err = c.hello().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.message,
        "connector is dead (connector was killed by the harness); not sending hello"
    );
}

#[test]
fn restart_is_bounded() {
    let mut c = spawn(&fixture("exit_after_hello.py")).with_max_restarts(2);
    for round in 0..3 {
        let pid = c.pid().unwrap();
        c.hello().unwrap();
        let err = c.claim("s", "q", 0).unwrap_err();
        assert!(
            err.message.starts_with("connector exited with status 3"),
            "{}",
            err.message
        );
        assert_reaped(pid);
        if round < 2 {
            c.restart().unwrap();
            assert_eq!(c.restarts(), round + 1);
            assert!(c.dead_reason().is_none());
        }
    }
    match c.restart() {
        Err(HarnessError::BadInput(m)) => assert!(m.contains("restarted 2 times"), "{m}"),
        other => panic!("expected the restart limit, got {other:?}"),
    }
    assert!(
        c.log_tail()
            .contains("[emq harness] restart 2 of the connector")
    );
}

#[test]
fn factory_makes_killable_children() {
    let f = ChildFactory::new(fixture("quirky.py"));
    assert!(f.killable());
    let mut a = f.make().unwrap();
    let mut b = f.make().unwrap();
    assert_eq!(a.hello().unwrap().name, "fake");
    assert_eq!(b.hello().unwrap().name, "fake");
    assert!(a.kill());
    assert!(a.hello().is_err());
    assert!(
        b.hello().is_ok(),
        "killing one child leaves the other alone"
    );
}

#[test]
fn bad_commands_are_harness_errors() {
    match ChildConnector::spawn(&ChildSpec::new(Vec::<String>::new())) {
        Err(HarnessError::BadInput(m)) => assert!(m.contains("empty"), "{m}"),
        other => panic!("expected BadInput, got {other:?}"),
    }
    match ChildConnector::spawn(&ChildSpec::new(["/nonexistent/emq-connector"])) {
        Err(HarnessError::Io { context, .. }) => {
            assert!(context.contains("/nonexistent/emq-connector"), "{context}")
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The real Python connector on a live engine.

#[test]
fn python_connector_runs_every_verb() {
    let Some(program) = python_connector() else {
        eprintln!(
            "skipped: no Python connector (set EMQ_PYTHON_CONNECTOR or run connectors/python provisioning)"
        );
        return;
    };
    let bundle_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle");
    let spec = ChildSpec::new([program.display().to_string()])
        .with_env("EMQ_BUNDLE_DIR", bundle_dir.display().to_string());
    let e = binary_engine();
    let bundle = Bundle::load_default().unwrap();
    let mut admin = e.prepare_db(3).unwrap();
    let url = e.url(3);
    let mut c = spawn(&spec);
    let pid = c.pid().unwrap();

    let hello = timed("python: hello", Duration::from_secs(10), || {
        c.hello().unwrap()
    });
    assert_eq!(hello.language, "python");
    assert_eq!(hello.bundle, "1.0.0");
    assert_eq!(
        hello.scripts["claim"],
        "2319de1e94e21dd355032c7a25b90636b53f36cd"
    );
    assert_eq!(hello.scripts.len(), 6);
    lifecycle(&mut c, &mut admin, &bundle, &url);

    // Two sessions in one process, each its own connection.
    c.connect("t", &url).unwrap();
    assert_eq!(c.pending_size("t", "q").unwrap(), 0);
    c.disconnect("t").unwrap();
    assert_eq!(
        c.pending_size("t", "q").unwrap_err().kind,
        ErrorKind::Invalid
    );

    let probe = timed(
        "python: pipeline_probe 10 000",
        Duration::from_secs(60),
        || c.pipeline_probe("s", "probe", 10_000).unwrap(),
    );
    assert_eq!(probe, (1..=10_000).collect::<Vec<i64>>());
    let n = timed(
        "python: batch 100 000 (depth 1000)",
        Duration::from_secs(120),
        || c.batch("s", "bq", 100_000, 1000, "x").unwrap(),
    );
    assert_eq!(n, 100_000);
    assert_eq!(c.pending_size("s", "bq").unwrap(), 100_000);

    error_kinds(&mut c, &mut admin, &url);
    assert!(
        c.dead_reason().is_none(),
        "connector errors are not process failures"
    );

    timed(
        "python: drop (stop obeyed)",
        Duration::from_millis(2500),
        || drop(c),
    );
    assert_reaped(pid);
    admin.flushdb().unwrap();
}

#[test]
fn death_by_signal_is_named() {
    let mut c = spawn(&fixture("crash.py"));
    let pid = c.pid().unwrap();
    c.hello().unwrap();
    let err = timed("crash: claim", Duration::from_secs(3), || {
        c.claim("s", "q", 1000).unwrap_err()
    });
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.message,
        "connector was killed by signal 11 during claim (seq 2); \
         last stderr line: crash.py: segfaulting now"
    );
    assert_reaped(pid);
}

#[test]
fn an_extra_line_is_reported() {
    let mut c = spawn(&fixture("chatty.py"));
    let pid = c.pid().unwrap();
    c.hello().unwrap();
    // Both lines were written at once; give the reader thread a moment to pass on the second.
    std::thread::sleep(Duration::from_millis(200));
    let err = c.pending_size("s", "q").unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.message.starts_with(
            "connector printed a line nobody asked for (after its answer to hello (seq 1), before pending_size (seq 2)): {\"seq\": 1, \"ok\": "
        ),
        "{}",
        err.message
    );
    assert_reaped(pid);
}

/// `hang_on.py VERB` in front of the quirky fake connector: answers `hello`, hangs on `VERB`.
fn hang_on(verb: &str) -> ChildSpec {
    let mut spec = fixture("hang_on.py");
    let quirky = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quirky.py");
    spec.argv.extend([
        verb.to_string(),
        "python3".into(),
        quirky.display().to_string(),
    ]);
    spec
}

#[test]
fn batch_timeout_grows_with_n() {
    // 3 s base (two Python starts must fit in it on a loaded machine) + 4000 × 250 µs = 4 s.
    let mut c = spawn(&hang_on("batch").with_timeout(Duration::from_secs(3)));
    let pid = c.pid().unwrap();
    c.hello().unwrap();
    let t0 = Instant::now();
    let err = timed(
        "hang_on batch: batch(4000), 3 s base",
        Duration::from_secs(7),
        || c.batch("s", "q", 4000, 100, "x").unwrap_err(),
    );
    assert!(t0.elapsed() >= Duration::from_millis(3950));
    assert_eq!(err.message, "no answer to batch (seq 2) within 4 s");
    assert_reaped(pid);
    let err = timed(
        "hang_on batch: probe on a fresh one",
        Duration::from_secs(3),
        || {
            let mut c = spawn(&hang_on("pipeline_probe").with_timeout(Duration::from_millis(500)));
            c.pipeline_probe("s", "k", 4).unwrap_err()
        },
    );
    assert_eq!(
        err.message,
        "no answer to pipeline_probe (seq 1) within 0.501 s"
    );
}

#[test]
fn a_timeout_is_remembered_until_the_next_gate() {
    // 3 s, or more on a busy machine: each `hello` here includes a Python start.
    let secs = (3.0 * common::slowness()).ceil() as u64;
    let f = ChildFactory::new(hang_on("pending_size").with_timeout(Duration::from_secs(secs)));
    let mut a = f.make().unwrap();
    let mut b = f.make().unwrap();
    a.hello().unwrap();
    b.hello().unwrap();
    let first = timed(
        "hang_on pending_size: the timeout",
        Duration::from_secs(2 * secs),
        || a.pending_size("s", "q").unwrap_err(),
    );
    assert_eq!(
        first.message,
        format!("no answer to pending_size (seq 2) within {secs} s")
    );
    assert_eq!(f.timed_out().as_deref(), Some(first.message.as_str()));
    let want = format!(
        "connector is dead (a connector timed out earlier in this gate: \
         no answer to pending_size (seq 2) within {secs} s); not sending hello"
    );
    // A sibling made before the timeout is not waited on: killed, fails at once.
    let err = timed("hang_on: the sibling", Duration::from_millis(1500), || {
        b.hello().unwrap_err()
    });
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Internal, want.as_str())
    );
    // A connector made after it is never started.
    let err = timed("hang_on: make after", Duration::from_millis(500), || {
        f.make().unwrap().hello().unwrap_err()
    });
    assert_eq!(err.message, want);
    // The next gate starts afresh.
    f.reset();
    assert_eq!(f.timed_out(), None);
    let mut d = f.make().unwrap();
    assert_eq!(d.hello().unwrap().name, "fake");
    // A clone shares the memory.
    let g = f.clone();
    assert!(d.pending_size("s", "q").is_err());
    assert!(g.timed_out().is_some());
    timed("hang_on: drops", Duration::from_secs(secs), || {
        drop((a, b, d))
    });
}
