//! Timeouts: a hang is cut at the per-request bound (grown by a batch's size), remembered until
//! the next gate so a hung connector costs one timeout per gate, and a slow start tolerated.
//! Their own concept: the only tests that wait on purpose.

use super::*;

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

#[test]
fn a_request_in_flight_while_the_harness_holds_a_node_gets_the_held_time_on_top() {
    // R5.8: G8's stall is the harness's, never counted against the connector.
    let secs = (2.0 * common::slowness()).ceil() as u64;
    let held = Duration::from_secs(2);
    let f = ChildFactory::new(hang_on("pending_size").with_timeout(Duration::from_secs(secs)));
    let mut a = f.make().unwrap();
    a.hello().unwrap();
    let g = f.clone();
    let holder = std::thread::spawn(move || {
        g.hold(true);
        std::thread::sleep(held);
        g.hold(false);
    });
    let t0 = Instant::now();
    let err = a.pending_size("s", "q").unwrap_err();
    let took = t0.elapsed();
    holder.join().unwrap();
    assert!(
        took >= Duration::from_secs(secs) + held,
        "timed out after {took:?}, before {secs} s and the 2 s held"
    );
    let want = format!("no answer to pending_size (seq 2) within {secs} s (and the ");
    assert!(
        err.message.starts_with(&want)
            && err
                .message
                .ends_with(" s the harness held a node stopped meanwhile)"),
        "{}",
        err.message
    );
    // The next gate starts with no hold.
    f.reset();
    let mut b = f.make().unwrap();
    b.hello().unwrap();
    let t0 = Instant::now();
    let err = b.pending_size("s", "q").unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(secs) + held, "{err:?}");
    assert_eq!(
        err.message,
        format!("no answer to pending_size (seq 2) within {secs} s")
    );
    drop((a, b));
}
