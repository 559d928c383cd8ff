//! The reference connector on a live engine: every verb's happy path, each error kind, the fence,
//! and NOSCRIPT recovery with exactly one load per script.

use emq::bundle::Bundle;
use emq::connector::reference::Reference;
use emq::connector::{Claimed, RetryOutcome, Verbs};
use emq::engine::{Engine, EngineChoice, EngineOptions};
use emq::error::ErrorKind;

fn engine(choice: EngineChoice) -> Engine {
    let opts = EngineOptions {
        choice,
        ..EngineOptions::default()
    };
    Engine::start(&opts).expect("engine (run ci/provision first)")
}

fn every_verb(e: &Engine) {
    let bundle = Bundle::load_default().unwrap();
    let mut admin = e.prepare_db(1).unwrap();
    let mut c = Reference::new(&bundle);
    let hello = c.hello().unwrap();
    assert_eq!(hello.bundle, "1.0.0");
    assert_eq!(
        hello.scripts["claim"],
        "2319de1e94e21dd355032c7a25b90636b53f36cd"
    );
    c.connect("s", &e.url(1)).unwrap();
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

    assert_eq!(c.pipeline_probe("s", "probe", 5).unwrap(), [1, 2, 3, 4, 5]);
    assert_eq!(c.batch("s", "bq", 1000, 100, "x").unwrap(), 1000);
    assert_eq!(c.pending_size("s", "bq").unwrap(), 1000);

    // Error kinds: invalid (nothing sent), engine, fence.
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
    let err = c.connect("t", &e.url(1)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Fence);
    assert!(
        err.message.contains('2') && err.message.contains('1'),
        "{}",
        err.message
    );
    admin.flushdb().unwrap();
}

#[test]
fn binary_engine_runs_every_verb() {
    every_verb(&engine(EngineChoice::Binary));
}

#[test]
fn container_engine_runs_every_verb() {
    if std::env::var("EMQ_SKIP_CONTAINER").is_ok_and(|v| v == "1") {
        eprintln!("skipped: EMQ_SKIP_CONTAINER=1");
        return;
    }
    every_verb(&engine(EngineChoice::Container));
}

#[test]
fn noscript_recovery_costs_one_load_per_script() {
    let e = engine(EngineChoice::Binary);
    let bundle = Bundle::load_default().unwrap();
    let mut admin = e.prepare_db(2).unwrap();
    let mut c = Reference::new(&bundle);
    c.connect("s", &e.url(2)).unwrap();
    for round in 0..2 {
        admin.script_flush().unwrap();
        admin.config_resetstat().unwrap();
        for _ in 0..20 {
            let id = c.enqueue("s", "q", "p", 0).unwrap();
            let got = c.claim("s", "q", 60_000).unwrap().unwrap();
            assert_eq!(got.id, id);
            assert!(c.complete("s", "q", &id, got.attempts).unwrap());
        }
        let stats = admin.commandstats().unwrap();
        assert_eq!(
            stats.get("script|load"),
            Some(&3),
            "round {round}: {stats:?}"
        );
        assert_eq!(stats.get("eval"), None);
    }
}

#[test]
fn monitor_sees_every_line_even_after_idle_gaps() {
    let e = engine(EngineChoice::Binary);
    let admin = e.prepare_db(4).unwrap();
    let monitor = admin.monitor().unwrap();
    let mut other = e.admin(4).unwrap();
    for i in 0..5 {
        // Idle gaps longer than any short read timeout used to drop the next line.
        std::thread::sleep(std::time::Duration::from_millis(150));
        other
            .query::<String>(&["ECHO", &format!("line-{i}")])
            .unwrap();
    }
    let lines = monitor.stop().unwrap();
    for i in 0..5 {
        assert!(
            lines.iter().any(|l| l.contains(&format!("\"line-{i}\""))),
            "line-{i} lost: {lines:?}"
        );
    }
}
