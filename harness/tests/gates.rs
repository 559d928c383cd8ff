//! Self-tests of G1–G5 and G8: the reference connector passes each; each deliberately broken
//! double of `emq::doubles::TABLE` fails exactly the gates its entry names and passes the others
//! (where a second gate fails too, the entry says why).
//!
//! Every test boots its own binary engine, so the tests run in parallel without sharing
//! `SCRIPT FLUSH`, `CONFIG RESETSTAT` or `MONITOR`.

use std::sync::Arc;
use std::time::Instant;

mod common;

use emq::connector::Connector;
use emq::connector::child::{ChildFactory, ChildSpec};
use emq::connector::reference::Reference;
use emq::doubles::{Double, TABLE};
use emq::engine::Engine;
use emq::error::HarnessError;
use emq::gates::rules::{gates_failing, is_cluster_double};
use emq::gates::{ALL, GateId};
use emq::gates::{ConnectorFactory, GateContext, GateOutcome, Verdict, run_gate};
use emq::protocol::bundle::Bundle;

/// The gates these tests cover.
const MINE: [GateId; 6] = [
    GateId::G1,
    GateId::G2,
    GateId::G3,
    GateId::G4,
    GateId::G5,
    GateId::G8,
];

/// Small enough to keep the tests quick; a certifying run uses ≥ 100 000.
const BATCH: i64 = 20_000;

fn engine() -> Engine {
    common::binary_engine()
}

/// Runs every gate of [`MINE`] against the reference connector or `double`, on one engine (a
/// cluster with `cluster`).
fn run_all(double: Option<Double>, cluster: bool) -> Vec<GateOutcome> {
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let b2 = bundle.clone();
    let factory: Box<dyn ConnectorFactory> = match double {
        Some(d) => d.factory(&bundle),
        None => Box::new(move || -> Result<Box<dyn Connector + Send>, HarnessError> {
            Ok(Reference::boxed(&b2))
        }),
    };
    run_with(&format!("{double:?}"), &bundle, factory.as_ref(), cluster)
}

/// G7's and G8's seed: 42, or `EMQ_SELFTEST_SEED` (to try the self-tests under other seeds).
fn seed() -> u64 {
    emq::settings::parsed(emq::settings::SELFTEST_SEED).unwrap_or(42)
}

/// Runs every gate of [`MINE`] with connectors from `factory`, on an engine of its own.
fn run_with(
    label: &str,
    bundle: &Arc<Bundle>,
    factory: &dyn ConnectorFactory,
    cluster: bool,
) -> Vec<GateOutcome> {
    let e = if cluster {
        common::cluster_engine()
    } else {
        engine()
    };
    let progress = |_: &str| {};
    let ctx = GateContext {
        engine: &e,
        bundle,
        factory,
        seed: seed(),
        histories: 10,
        batch: BATCH,
        progress: &progress,
    };
    // EMQ_SELFTEST_GATES=G1,G4 narrows the run while working on a gate.
    let only = emq::settings::var(emq::settings::SELFTEST_GATES).unwrap_or_default();
    ALL.iter()
        .filter(|g| MINE.contains(&g.id))
        .filter(|g| only.is_empty() || only.split(',').any(|o| o.parse() == Ok(g.id)))
        .map(|g| {
            let t0 = Instant::now();
            let out = run_gate(g, &ctx);
            eprintln!(
                "{label} {} {}: {:?} in {:.2?}",
                g.id,
                g.name,
                out.verdict,
                t0.elapsed()
            );
            for line in &out.evidence {
                eprintln!("    {line}");
            }
            eprintln!("    figures: {:?}", out.figures);
            out
        })
        .collect()
}

/// The gates `double` must fail (all others among [`MINE`] must pass).
fn expected_failures(double: Option<Double>) -> Vec<GateId> {
    double.map(gates_failing).unwrap_or_default()
}

/// A double of SPEC §8 passes every gate on a single engine and fails its gates on a cluster;
/// every other double is judged on a single engine.
fn judge(double: Option<Double>) {
    if double.is_some_and(is_cluster_double) {
        judge_on(double, false, &[]);
        judge_on(double, true, &expected_failures(double));
    } else {
        judge_on(double, false, &expected_failures(double));
    }
}

fn judge_on(double: Option<Double>, cluster: bool, want: &[GateId]) {
    let outs = run_all(double, cluster);
    let mut wrong = Vec::new();
    for o in &outs {
        let expected = if want.contains(&o.id) {
            Verdict::Fail
        } else {
            Verdict::Pass
        };
        if o.verdict != expected {
            wrong.push(format!(
                "{} {}: {:?}, expected {expected:?}\n  {}\n  figures: {:?}",
                o.id,
                o.name,
                o.verdict,
                o.evidence
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n  "),
                o.figures
            ));
        }
    }
    let on = if cluster { "cluster" } else { "single engine" };
    assert!(
        wrong.is_empty(),
        "{double:?} on a {on}:\n{}",
        wrong.join("\n")
    );
}

/// Every double whose entry names a gate of [`MINE`] has its own test above, and the table names
/// only gates that exist.
#[test]
fn doubles_table_matches_the_tests() {
    let src = include_str!("gates.rs");
    for e in TABLE {
        let gates = gates_failing(e.double);
        let tested = src.contains(&format!("judge(Some(Double::{:?}))", e.double));
        let gated = gates.iter().any(|g| MINE.contains(g));
        assert_eq!(
            tested, gated,
            "{:?}: a gate self-test exists iff its entry names one of {MINE:?}",
            e.double
        );
        assert!(!gates.is_empty(), "{:?} is caught by nothing", e.double);
        if gates.iter().filter(|g| MINE.contains(g)).count() > 1 {
            assert!(
                !e.why_also.is_empty(),
                "{:?}: say why it fails more than one gate",
                e.double
            );
        }
    }
}

#[test]
fn reference_passes_every_gate() {
    judge(None);
}

#[test]
fn reference_passes_every_gate_on_a_cluster() {
    judge_on(None, true, &[]);
}

#[test]
fn seed_node_only_fails_on_a_cluster() {
    judge(Some(Double::SeedNodeOnly));
}

#[test]
fn cluster_any_database_fails_g1_on_a_cluster() {
    judge(Some(Double::ClusterAnyDatabase));
}

#[test]
fn load_on_seed_only_fails_on_a_cluster() {
    judge(Some(Double::LoadOnSeedOnly));
}

#[test]
fn ungrouped_batch_fails_g5_on_a_cluster() {
    judge(Some(Double::UngroupedBatch));
}

/// On a cluster the engine itself refuses the untagged root: G4 says so.
#[test]
fn untagged_root_is_refused_by_the_cluster_engine() {
    let outs = run_all(Some(Double::UntaggedRoot), true);
    let g4 = outs.iter().find(|o| o.id == GateId::G4).expect("G4 ran");
    assert_eq!(g4.verdict, Verdict::Fail, "{:?}", g4.evidence);
    assert!(
        g4.evidence.iter().any(|l| l
            .text
            .contains("the engine refused a script call that touched a key outside its slot")),
        "{:?}",
        g4.evidence
    );
}

#[test]
fn no_redirects_fails_g8_on_a_cluster() {
    judge(Some(Double::NoRedirects));
}

#[test]
fn skip_fence_fails_g1() {
    judge(Some(Double::SkipFence));
}

#[test]
fn foreign_scripts_fail_g2() {
    judge(Some(Double::ForeignScripts));
}

#[test]
fn load_every_call_fails_g3() {
    judge(Some(Double::LoadEveryCall));
}

#[test]
fn reload_on_any_error_fails_g3() {
    judge(Some(Double::ReloadOnAnyError));
}

#[test]
fn untagged_root_fails_g4() {
    judge(Some(Double::UntaggedRoot));
}

#[test]
fn short_batch_fails_g5() {
    judge(Some(Double::ShortBatch));
}

#[test]
fn raw_complete_fails_g8() {
    judge(Some(Double::RawComplete));
}

#[test]
fn enqueue_twice_fails_g8() {
    judge(Some(Double::EnqueueTwice));
}

#[test]
fn resend_after_lost_reply_fails_g8_and_g3() {
    judge(Some(Double::ResendAfterLostReply));
}

#[test]
fn ack_unsent_fails_g8() {
    judge(Some(Double::AckUnsent));
}

#[test]
fn swallow_connection_errors_fails_g8() {
    judge(Some(Double::SwallowConnectionErrors));
}

/// redis-py's default retry policy, turned back on in the Python connector: skipped when the
/// Python connector is not provisioned.
#[test]
fn python_retry_on_error_fails_g8() {
    if common::python_connector().is_none() {
        return;
    }
    judge(Some(Double::PythonRetryOnError));
}

/// redis-py `ClusterPipeline`'s re-send of a node's whole pipeline after a failed read, in the
/// reference: G8's fault phase on a cluster (the proxy in front of every node) catches it.
#[test]
fn resend_cluster_pipeline_fails_g8_on_a_cluster() {
    judge(Some(Double::ResendClusterPipeline));
}

/// redis-py `RedisCluster`'s default retry on a connection error, kept in the Python connector
/// (`--cluster-retry`): skipped when the Python connector is not provisioned.
#[test]
fn python_cluster_retry_fails_g8_on_a_cluster() {
    if common::python_connector().is_none() {
        return;
    }
    judge(Some(Double::PythonClusterRetry));
}

#[test]
fn silent_reconnect_fails_g8() {
    judge(Some(Double::SilentReconnect));
}

/// redis-py's pool replacing a closed connection without the fence: the Python connector with
/// `--silent-reconnect`.
#[test]
fn python_silent_reconnect_fails_g8() {
    if common::python_connector().is_none() {
        return;
    }
    judge(Some(Double::PythonSilentReconnect));
}

/// The Python connector (a child process, so `Connector::kill` really kills it) passes too.
#[test]
fn python_connector_passes_every_gate() {
    let Some(program) = common::python_connector() else {
        return;
    };
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let factory = ChildFactory::new(ChildSpec::new([program.display().to_string()]));
    let outs = run_with("python", &bundle, &factory, false);
    let wrong: Vec<String> = outs
        .iter()
        .filter(|o| o.verdict != Verdict::Pass)
        .map(|o| {
            format!(
                "{} {}: {:?}\n  {}",
                o.id,
                o.name,
                o.verdict,
                o.evidence
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n  ")
            )
        })
        .collect();
    assert!(wrong.is_empty(), "python:\n{}", wrong.join("\n"));
}

#[test]
fn unpipelined_fails_g5() {
    judge(Some(Double::Unpipelined));
}

#[test]
fn fence_hset_fails_g1() {
    judge(Some(Double::FenceHset));
}

#[test]
fn fence_ignores_protocol_fails_g1() {
    judge(Some(Double::FenceIgnoresProtocol));
}

/// The fault proxy, live: each fault acts on exactly the command its rule picks, also inside a
/// pipeline, and the engine's state says which commands ran.
#[test]
fn the_fault_proxy_acts_on_the_command_it_is_told() {
    use emq::connector::Verbs;
    use emq::engine::admin::Admin;
    use emq::faults::{Fault, Matcher, Proxy, Rule};
    use std::time::Duration;

    let e = engine();
    let db = 5;
    let mut direct = e.prepare_db(db).unwrap();
    let proxy = Proxy::start(&format!("{}:{}", e.host, e.port)).unwrap();
    let url = proxy.url_for(&e.url(db), &e.host, e.port);
    let incr = |fault, skip| Rule {
        matcher: Matcher {
            name: Some("incr".into()),
            ..Matcher::default()
        },
        skip,
        fault,
    };
    let counter = |a: &mut Admin| a.query::<Option<i64>>(&["GET", "k"]).unwrap();
    let through = || Admin::connect(&url).unwrap();

    // Passing through, then each fault on the next INCR.
    assert_eq!(through().query::<i64>(&["INCR", "k"]).unwrap(), 1);
    for (fault, after) in [
        (Fault::LostReply, 2),
        (Fault::DropBefore, 2),
        (Fault::CutReply, 3),
    ] {
        let mut a = through();
        proxy.arm(incr(fault, 0));
        assert!(a.query::<i64>(&["INCR", "k"]).is_err(), "{fault:?}");
        assert_eq!(counter(&mut direct), Some(after), "{fault:?}");
        let fired = proxy.take_fired();
        assert_eq!(fired.len(), 1);
        assert_eq!(
            (fired[0].command.as_str(), fired[0].fault),
            ("INCR k", fault)
        );
    }
    let mut a = through();
    proxy.arm(incr(Fault::Delay(Duration::from_millis(300)), 0));
    let t0 = std::time::Instant::now();
    assert_eq!(a.query::<i64>(&["INCR", "k"]).unwrap(), 4);
    assert!(t0.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        a.query::<i64>(&["INCR", "k"]).unwrap(),
        5,
        "the connection lives on"
    );

    // Reset on connect, then the n-th command of a connection.
    proxy.arm(Rule {
        matcher: Matcher::default(),
        skip: 0,
        fault: Fault::ResetOnConnect,
    });
    assert!(
        Admin::connect(&url)
            .and_then(|mut a| a.query::<i64>(&["INCR", "k"]))
            .is_err()
    );
    let before = proxy.counts();
    let mut a = through();
    assert_eq!(proxy.counts().0, before.0 + 1);
    // The handshake counts too: learn the first INCR's index (a zero delay), drop the next one.
    proxy.arm(incr(Fault::Delay(Duration::ZERO), 0));
    assert_eq!(a.query::<i64>(&["INCR", "k"]).unwrap(), 6);
    let n = proxy.take_fired()[0].index + 1;
    proxy.arm(Rule {
        matcher: Matcher::nth(n),
        skip: 0,
        fault: Fault::DropBefore,
    });
    assert!(a.query::<i64>(&["INCR", "k"]).is_err());
    assert_eq!(counter(&mut direct), Some(6));
    assert_eq!(proxy.take_fired()[0].index, n);

    // A pipeline of 100 INCR with the 50th's reply lost: 50 ran, nothing after it was forwarded.
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let mut c = Reference::boxed(&bundle);
    c.connect("p", &url).unwrap();
    proxy.arm(incr(Fault::LostReply, 49));
    assert!(c.pipeline_probe("p", "probe", 100).is_err());
    assert_eq!(
        direct.query::<Option<i64>>(&["GET", "probe"]).unwrap(),
        Some(50)
    );
    let fired = proxy.take_fired();
    assert_eq!(fired.len(), 1);
}
