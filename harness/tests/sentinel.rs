//! The Sentinel engine, live: a primary, two replicas and three Sentinels boot and agree on the
//! primary at its proxy; a write reaches the replicas; a SIGKILLed primary is failed over to a
//! replica that the other follows; the old primary, restarted, comes back as a replica of the new
//! one; and nothing the engine started outlives it.

mod common;

use std::time::Instant;

use emq::engine::EngineChoice;
use emq::engine::topology::Role;

/// The `valkey-server` processes this test process started (its children, not yet reaped).
fn servers() -> Vec<u32> {
    let me = std::process::id();
    common::processes(|dir| {
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            return false;
        };
        // `pid (comm) S ppid ...`: after the last ')', the state, then the parent.
        let mut rest = stat.rsplit_once(')').map_or("", |r| r.1).split_whitespace();
        let (state, ppid) = (rest.next(), rest.next().and_then(|p| p.parse::<u32>().ok()));
        let server =
            std::fs::read_link(dir.join("exe")).is_ok_and(|e| e.ends_with("valkey-server"));
        ppid == Some(me) && server && state != Some("Z")
    })
}

#[test]
fn sentinels_agree_fail_the_primary_over_and_take_it_back_as_a_replica() {
    let t0 = Instant::now();
    let before = servers();
    let engine = common::engine(EngineChoice::Sentinel);
    let started: Vec<u32> = servers()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(started.len(), 6, "three data nodes, three Sentinels");
    eprintln!("booted in {:?}: {}", t0.elapsed(), engine.describe());

    let nodes = engine.nodes();
    let (primary, replicas) = (nodes[0], nodes[1..].to_vec());
    assert_eq!((nodes.len(), engine.sentinels().len()), (3, 3));
    assert_eq!(engine.agreed_primary(), Ok(primary));
    // What every Sentinel hands out is the primary's proxy.
    let announced = engine.announced_port(primary);
    assert_eq!(engine.proxy_of(primary).unwrap().port(), announced);
    assert_ne!(announced, engine.port_of(primary));
    for s in engine.sentinels() {
        let addr: (String, String) = engine
            .sentinel_admin(s)
            .unwrap()
            .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "emq"])
            .unwrap();
        assert_eq!(
            addr,
            ("127.0.0.1".to_string(), announced.to_string()),
            "{s}"
        );
        let proxy = engine.sentinel_proxy(s).unwrap().port();
        assert_eq!(engine.sentinel_at(proxy), Some(s));
    }
    assert_eq!(engine.role(primary), Some(Role::Primary));

    // A write through the primary reaches both replicas.
    let key = "emq:sentinel-test";
    engine
        .node_admin(primary)
        .unwrap()
        .query::<()>(&["SET", key, "before"])
        .unwrap();
    for r in &replicas {
        assert_eq!(engine.role(*r), Some(Role::Replica), "{r}");
        engine.wait_in_sync(primary, *r).unwrap();
        let got = engine.node_admin(*r).unwrap().get(key).unwrap();
        assert_eq!(got.as_deref(), Some("before"), "{r}");
    }

    // SIGKILL: the Sentinels promote a replica, and the other follows it.
    let t1 = Instant::now();
    engine.kill_node(primary).unwrap();
    let new = engine.wait_for_new_primary(primary).unwrap();
    assert!(replicas.contains(&new), "{new} is one of the replicas");
    assert_eq!(engine.role(new), Some(Role::Primary));
    let other = *replicas.iter().find(|r| **r != new).unwrap();
    engine.wait_following(other, new).unwrap();
    eprintln!("failed over to {new} in {:?}", t1.elapsed());
    let kept = engine.node_admin(new).unwrap().get(key).unwrap();
    assert_eq!(kept.as_deref(), Some("before"), "the write survived");

    // The old primary, restarted, is made a replica of the new one.
    let t2 = Instant::now();
    engine.restart_node(primary).unwrap();
    engine.wait_following(primary, new).unwrap();
    engine.wait_in_sync(new, primary).unwrap();
    assert_eq!(engine.role(primary), Some(Role::Replica));
    let back = engine.node_admin(primary).unwrap().get(key).unwrap();
    assert_eq!(back.as_deref(), Some("before"));
    eprintln!("{primary} back as a replica in {:?}", t2.elapsed());

    drop(engine);
    let left: Vec<u32> = servers()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(left.is_empty(), "valkey-servers left running: {left:?}");
    eprintln!("the whole test: {:?}", t0.elapsed());
}
