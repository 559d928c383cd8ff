//! The lifecycle every connector test walks through, shared by the reference and child-process
//! tests so both connectors are held to the same steps.

use emq::connector::{Claimed, Connector, RetryOutcome, Verbs};
use emq::engine::Admin;
use emq::error::ErrorKind;
use emq::protocol::bundle::Bundle;

/// Connects session `s` on `url` (the fence is installed), then enqueue → browse → claim →
/// complete (wrong token, right token, twice) → retry (delayed, stale) → promote → reap to dead.
pub fn lifecycle<C: Connector + ?Sized>(c: &mut C, admin: &mut Admin, bundle: &Bundle, url: &str) {
    c.connect("s", url).unwrap();
    let fence = admin.hgetall("emq:fence").unwrap();
    assert_eq!(fence["protocol"], "1");
    assert_eq!(fence["digest"], bundle.manifest.digest);

    let a = c.enqueue("s", "q", "alpha", 0).unwrap();
    let b = c.enqueue("s", "q", "beta", 0).unwrap();
    assert_eq!(
        (a.as_str(), b.as_str()),
        ("j0000000000000001", "j0000000000000002")
    );
    assert_eq!(c.pending_size("s", "q").unwrap(), 2);
    let listed = c.browse("s", "q", 0, 10).unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|j| j.payload.as_str())
            .collect::<Vec<_>>(),
        ["alpha", "beta"]
    );
    assert_eq!(c.browse("s", "q", 1, 1).unwrap()[0].id, b);

    let got = c.claim("s", "q", 30_000).unwrap();
    assert_eq!(
        got,
        Some(Claimed {
            id: a.clone(),
            payload: "alpha".into(),
            attempts: 1
        })
    );
    assert!(
        !c.complete("s", "q", &a, 7).unwrap(),
        "wrong token must not complete"
    );
    assert!(c.complete("s", "q", &a, 1).unwrap());
    assert!(!c.complete("s", "q", &a, 1).unwrap(), "double complete");

    let got = c.claim("s", "q", 0).unwrap().unwrap();
    assert_eq!(
        c.retry("s", "q", &got.id, got.attempts, 0, 5).unwrap(),
        RetryOutcome::Delayed
    );
    assert_eq!(
        c.retry("s", "q", &got.id, got.attempts, 0, 5).unwrap(),
        RetryOutcome::Stale
    );
    assert_eq!(c.promote("s", "q", 10).unwrap(), 1);
    let got = c.claim("s", "q", 0).unwrap().unwrap();
    assert_eq!(got.attempts, 2);
    assert_eq!(
        c.reap("s", "q", 2, 10).unwrap(),
        1,
        "attempts == max goes dead"
    );
    assert_eq!(admin.zrange_withscores("emq:{q}:dead").unwrap().len(), 1);
    assert_eq!(c.claim("s", "q", 0).unwrap(), None);
}

/// Each error kind once: invalid (bad queue, negative lease, bad id, unknown session), engine (a
/// key of the wrong type), fence (a protocol-2 fence refuses a new session, naming both versions).
/// Leaves a foreign fence behind: call it last.
pub fn error_kinds<C: Connector + ?Sized>(c: &mut C, admin: &mut Admin, url: &str) {
    assert_eq!(
        c.enqueue("s", "bad queue", "x", 0).unwrap_err().kind,
        ErrorKind::Invalid
    );
    assert_eq!(c.claim("s", "q", -1).unwrap_err().kind, ErrorKind::Invalid);
    assert_eq!(
        c.complete("s", "q", "nope", 1).unwrap_err().kind,
        ErrorKind::Invalid
    );
    assert_eq!(
        c.pending_size("ghost", "q").unwrap_err().kind,
        ErrorKind::Invalid
    );
    admin.query::<()>(&["SET", "emq:{w}:pending", "x"]).unwrap();
    assert_eq!(c.claim("s", "w", 0).unwrap_err().kind, ErrorKind::Engine);
    admin
        .hset("emq:fence", &[("protocol", "2"), ("bundle", "2.0.0")])
        .unwrap();
    let err = c.connect("fenced", url).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Fence);
    assert!(
        err.message.contains('2') && err.message.contains('1'),
        "{}",
        err.message
    );
}
