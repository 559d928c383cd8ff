//! The child-process connector against real processes: misbehaving fake connectors (Python 3
//! scripts in `tests/fixtures/`) must each end in the exact error kind and message, within a bound,
//! with nothing left running; and the real Python connector must pass every verb on a live engine.
//!
//! Time bounds here are bounds on a hang (generous, so they never flake), not speed claims.

mod common;
#[path = "child/processes.rs"]
mod processes;
#[path = "child/timeouts.rs"]
mod timeouts;

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
