//! The Sentinel engine, live: a primary, two replicas and three Sentinels boot and agree on the
//! primary at its proxy; the connector's user asks a Sentinel what a client asks and nothing
//! more; a write reaches the replicas; a SIGKILLed primary is failed over to a replica that the
//! other follows, announced on `+switch-master` to the connector's subscription; the old
//! primary, restarted, comes back as a replica of the new one; and nothing the engine started
//! outlives it.

mod common;

use std::time::{Duration, Instant};

use emq::engine::admin::Subscription;
use emq::engine::topology::{Role, SentinelId};
use emq::engine::{Admin, Engine, EngineChoice};
use redis::Value;

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
    the_connector_asks_a_sentinel_only_what_a_client_asks(&engine);
    // The connector's subscription to `+switch-master`, before the failover it announces.
    let url = engine
        .sentinel_connector_url(engine.sentinels()[0])
        .unwrap();
    let mut switch = Subscription::channel(&url, "+switch-master").unwrap();

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
    let (from, to) = switched(&mut switch);
    let announced = |n| engine.announced_port(n).to_string();
    assert_eq!(
        (from, to),
        (announced(primary), announced(new)),
        "+switch-master"
    );
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

    drop(switch);
    drop(engine);
    let left: Vec<u32> = servers()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(left.is_empty(), "valkey-servers left running: {left:?}");
    eprintln!("the whole test: {:?}", t0.elapsed());
}

/// A connection to Sentinel `id` as the connector's user.
fn as_connector(engine: &Engine, id: SentinelId) -> Admin {
    Admin::connect(&engine.sentinel_connector_url(id).unwrap()).unwrap()
}

/// What a client asks a Sentinel it may (the primary's address, the Sentinel list, a
/// `+switch-master` subscription); what steers a Sentinel, or hears more, it may not.
fn the_connector_asks_a_sentinel_only_what_a_client_asks(engine: &Engine) {
    let s = engine.sentinels()[0];
    let mut con = as_connector(engine, s);
    let addr: (String, u16) = con
        .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "emq"])
        .unwrap();
    assert_eq!(addr.1, engine.announced_port(engine.nodes()[0]));
    con.query::<Value>(&["SENTINEL", "SENTINELS", "emq"])
        .unwrap();
    for refused in [
        &["SENTINEL", "FAILOVER", "emq"][..],
        &["SENTINEL", "SET", "emq", "quorum", "1"],
        &["SENTINEL", "REMOVE", "emq"],
        &["SENTINEL", "CONFIG", "SET", "announce-port", "1"],
        &["SENTINEL", "RESET", "*"],
        &["SENTINEL", "REPLICAS", "emq"],
        &["ACL", "LIST"],
        &["SHUTDOWN", "NOSAVE"],
        &["PUBLISH", "+switch-master", "forged"],
    ] {
        let e = con.query::<Value>(refused).expect_err(&refused.join(" "));
        assert!(noperm(&e), "{}: {e}", refused.join(" "));
    }
    // A Sentinel does not know CONFIG at all: refused before any ACL.
    assert!(con.query::<Value>(&["CONFIG", "GET", "*"]).is_err());
    let url = engine.sentinel_connector_url(s).unwrap();
    Subscription::pattern(&url, "+switch-master").unwrap();
    for channel in ["+sdown", "__sentinel__:hello"] {
        let e = Subscription::channel(&url, channel).err().unwrap();
        assert!(noperm(&e), "{channel}: {e}");
    }
    let e = Subscription::pattern(&url, "*").err().unwrap();
    assert!(noperm(&e), "PSUBSCRIBE *: {e}");
}

/// True when `e` is the engine's `NOPERM` (the client spells it `NoPerm`).
fn noperm(e: &emq::error::HarnessError) -> bool {
    e.to_string().to_ascii_lowercase().contains("noperm")
}

/// The old and new primary's ports of the next `+switch-master <name> <ip> <old> <ip> <new>`.
fn switched(sub: &mut Subscription) -> (String, String) {
    let text = sub.next_payload(Duration::from_secs(30)).unwrap();
    let words: Vec<&str> = text.split(' ').collect();
    assert_eq!((words.len(), words[0]), (5, "emq"), "{text}");
    (words[2].to_string(), words[4].to_string())
}
