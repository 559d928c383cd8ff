//! The child's process: killed, reaped and restarted within bounds, its whole group gone, and its
//! death (by a signal too) named. Its own concept: what happens to the process, whatever it said.

use super::*;

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
