//! Engine events are not connector verdicts: a gate during which the engine evicts keys, or a
//! cluster fails over without the gate asking, is ERROR naming the event, even where the gate
//! would have said FAIL; the same gate on a quiet engine keeps its verdict.

mod common;

use std::sync::Arc;

use emq::connector::Connector;
use emq::connector::reference::Reference;
use emq::engine::Engine;
use emq::engine::topology::Role;
use emq::error::HarnessError;
use emq::gates::{ConnectorFactory, Gate, GateContext, GateError, GateOutcome, Verdict, run_gate};

fn judge(
    engine: &Engine,
    run: fn(&GateContext<'_>, &mut GateOutcome) -> Result<(), GateError>,
) -> GateOutcome {
    let bundle = common::bundle();
    let b2: Arc<_> = bundle.clone();
    let factory =
        move || -> Result<Box<dyn Connector + Send>, HarnessError> { Ok(Reference::boxed(&b2)) };
    let ctx = GateContext {
        seed: 1,
        histories: 1,
        batch: 1,
        ..common::gate_context(engine, &bundle, &factory as &dyn ConnectorFactory)
    };
    run_gate(
        &Gate {
            id: emq::gates::GateId::G1,
            name: "event",
            run,
            alone: false,
        },
        &ctx,
    )
}

/// A gate that fails the connector and, meanwhile, makes the engine evict keys.
fn fail_while_evicting(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let mut a = ctx.engine.admin(5).unwrap();
    a.query::<()>(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"])
        .unwrap();
    let big = "x".repeat(100_000);
    for i in 0..40 {
        a.query::<()>(&["SET", &format!("k{i}"), &big]).unwrap();
    }
    let used: String = a.query(&["INFO", "memory"]).unwrap();
    let used = used
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .to_string();
    a.query::<()>(&["CONFIG", "SET", "maxmemory", &used])
        .unwrap();
    for i in 40..80 {
        let _ = a.query::<()>(&["SET", &format!("k{i}"), &big]);
    }
    a.query::<()>(&["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    a.query::<()>(&["FLUSHDB"]).unwrap();
    out.fail("the connector did something wrong");
    Ok(())
}

fn quiet_fail(_: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    out.fail("the connector did something wrong");
    Ok(())
}

#[test]
fn an_eviction_during_a_gate_is_an_error_not_a_fail() {
    let e = common::binary_engine();
    let o = judge(&e, fail_while_evicting);
    assert_eq!(o.verdict, Verdict::Error, "{:#?}", o.evidence);
    assert!(
        o.evidence.iter().any(|l| l.text.contains("evicted")),
        "{:#?}",
        o.evidence
    );
    let o = judge(&e, quiet_fail);
    assert_eq!(o.verdict, Verdict::Fail, "{:#?}", o.evidence);
}

/// A gate that fails over the first shard behind its own back (no new baseline).
fn unasked_failover(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let e = ctx.engine;
    let old = e.primaries(&e.admin(0).unwrap())[0];
    let new = e.replica_of(old).unwrap();
    let mut replica = e.node_admin(new).unwrap();
    replica.query::<()>(&["CLUSTER", "FAILOVER"]).unwrap();
    for _ in 0..200 {
        if e.role(new) == Some(Role::Primary) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    out.pass("nothing judged");
    Ok(())
}

#[test]
fn a_failover_the_gate_did_not_ask_for_is_an_error() {
    let e = common::cluster_engine();
    let o = judge(&e, unasked_failover);
    assert_eq!(o.verdict, Verdict::Error, "{:#?}", o.evidence);
    let text = o
        .evidence
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains("change role") || text.contains("epoch"),
        "{text}"
    );
    // A gate on the cluster as it now stands is judged as usual.
    let o = judge(&e, quiet_fail);
    assert_eq!(o.verdict, Verdict::Fail, "{:#?}", o.evidence);
}
