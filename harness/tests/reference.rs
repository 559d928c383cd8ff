//! The reference connector on a live engine: every verb's happy path, each error kind, the fence,
//! and NOSCRIPT recovery with exactly one load per script.

mod common;

use common::engine;
use common::lifecycle::{error_kinds, lifecycle};
use emq::connector::reference::Reference;
use emq::connector::{Connector, Verbs};
use emq::engine::{Engine, EngineChoice};
use emq::protocol::bundle::Bundle;
use emq::protocol::grammar::FENCE_KEY;

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
    lifecycle(&mut c, &mut admin, &bundle, &e.url(1));

    assert_eq!(c.pipeline_probe("s", "probe", 5).unwrap(), [1, 2, 3, 4, 5]);
    assert_eq!(c.batch("s", "bq", 1000, 100, "x").unwrap(), 1000);
    assert_eq!(c.pending_size("s", "bq").unwrap(), 1000);

    error_kinds(&mut c, &mut admin, &e.url(1));
    admin.flushdb().unwrap();
}

#[test]
fn binary_engine_runs_every_verb() {
    every_verb(&engine(EngineChoice::Binary));
}

#[test]
fn container_engine_runs_every_verb() {
    if emq::settings::flag(emq::settings::SKIP_CONTAINER) {
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
    c.connect("s", e.url(2)).unwrap();
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

/// R3.3: a fence of the connector's protocol with another digest connects with a warning in the
/// connector's log, and only then (the log is what G6 shows beside a failing case).
#[test]
fn other_digest_warns_and_only_then() {
    let e = engine(EngineChoice::Binary);
    let bundle = Bundle::load_default().unwrap();
    let mut admin = e.prepare_db(3).unwrap();
    let mut c = Reference::new(&bundle);
    c.connect("s", e.url(3)).unwrap();
    c.connect("t", e.url(3)).unwrap();
    assert_eq!(c.log_tail(), "", "the connector's own fence: no warning");
    admin.hset(FENCE_KEY, &[("digest", "another")]).unwrap();
    c.connect("u", e.url(3)).unwrap();
    let log = c.log_tail();
    assert!(
        log.contains("warning") && log.contains("another") && log.contains(&bundle.manifest.digest),
        "{log:?}"
    );
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
