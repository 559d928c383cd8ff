//! The Sentinel engine, live: a primary, two replicas and three Sentinels boot and agree on the
//! primary at its proxy; the connector's user asks a Sentinel what a client asks and nothing
//! more; a write reaches the replicas; a SIGKILLed primary is failed over to a replica that the
//! other follows, announced on `+switch-master` to the connector's subscription; the old
//! primary, restarted, comes back as a replica of the new one; and nothing the engine started
//! outlives it. The same over TLS (SPEC §10): every server on a TLS port only, every address
//! a Sentinel hands out naming `localhost`, the one name the certificates give.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use emq::engine::admin::Subscription;
use emq::engine::named::EngineName;
use emq::engine::sentinel::announced_host;
use emq::engine::topology::{NodeId, Role, SentinelId};
use emq::engine::{Admin, Engine, EngineChoice};
use emq::protocol::url::EngineUrl;
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

/// The two engines boot one at a time: each counts the servers it started among this test
/// process's children, and twelve servers on a shared machine would starve each other's
/// Sentinels into failovers nobody asked for.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn sentinels_agree_fail_the_primary_over_and_take_it_back_as_a_replica() {
    boot_fail_over_and_take_back(|| common::engine(EngineChoice::Sentinel));
}

#[test]
fn over_tls_sentinels_agree_fail_the_primary_over_and_take_it_back_as_a_replica() {
    boot_fail_over_and_take_back(|| {
        let name = EngineName::resolve("valkey-9.1-tls")
            .unwrap_or_else(|e| panic!("{e} (run ci/provision --engines valkey-9.1-tls)"));
        let opts = emq::cmd::matrix::engine_options(&name, EngineChoice::Sentinel);
        assert!(opts.tls);
        Engine::start(&opts).unwrap_or_else(|e| panic!("TLS Sentinel engine: {e}"))
    });
}

/// The whole life of a Sentinel engine that `boot` boots: it agrees, answers the connector's
/// user as it should, fails over, takes the old primary back, and leaves nothing running.
fn boot_fail_over_and_take_back(boot: fn() -> Engine) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    let before = servers();
    let engine = boot();
    let started: Vec<u32> = servers()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(started.len(), 6, "three data nodes, three Sentinels");
    eprintln!("booted in {:?}: {}", t0.elapsed(), engine.describe());

    the_sentinels_hand_out_the_primarys_proxy(&engine);
    plaintext_is_answered_only_without_tls(&engine);
    the_connector_asks_a_sentinel_only_what_a_client_asks(&engine);
    // The connector's subscription to `+switch-master`, before the failover it announces.
    let url = engine
        .sentinel_connector_url(engine.sentinels()[0])
        .unwrap();
    let mut switch = Subscription::channel(&url, "+switch-master").unwrap();
    let new = a_write_survives_a_failover(&engine, &mut switch);
    the_old_primary_comes_back_as_a_replica(&engine, new);

    drop(switch);
    drop(engine);
    let left: Vec<u32> = servers()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(left.is_empty(), "valkey-servers left running: {left:?}");
    eprintln!("the whole test: {:?}", t0.elapsed());
}

/// Every Sentinel names node 0 at its proxy, by the host the engine announces (the
/// certificates' name over TLS), and each Sentinel is found by its proxy's port.
fn the_sentinels_hand_out_the_primarys_proxy(engine: &Engine) {
    let nodes = engine.nodes();
    let primary = nodes[0];
    assert_eq!((nodes.len(), engine.sentinels().len()), (3, 3));
    assert_eq!(engine.agreed_primary(), Ok(primary));
    let announced = engine.announced_port(primary);
    assert_eq!(engine.proxy_of(primary).unwrap().port(), announced);
    assert_ne!(announced, engine.port_of(primary));
    let host = announced_host(engine.tls().is_some());
    for s in engine.sentinels() {
        let addr: (String, String) = engine
            .sentinel_admin(s)
            .unwrap()
            .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "emq"])
            .unwrap();
        assert_eq!(addr, (host.to_string(), announced.to_string()), "{s}");
        let proxy = engine.sentinel_proxy(s).unwrap().port();
        assert_eq!(engine.sentinel_at(proxy), Some(s));
    }
    assert_eq!(engine.role(primary), Some(Role::Primary));
}

/// Each server's own port answers the admin in plaintext on a plain engine and not at all on a
/// TLS one (TLS only, SPEC §10): there, replication and the Sentinels' links that work are TLS.
fn plaintext_is_answered_only_without_tls(engine: &Engine) {
    let tls = engine.tls().is_some();
    let nodes = engine.nodes().into_iter().map(|n| engine.port_of(n));
    let sentinels = engine
        .sentinels()
        .into_iter()
        .map(|s| engine.sentinel_port(s).unwrap());
    let (user, pw) = (engine.admin_user().unwrap(), engine.password().unwrap());
    for port in nodes.chain(sentinels) {
        let plain = Admin::connect(&format!("redis://{user}:{pw}@127.0.0.1:{port}/0"));
        assert_eq!(plain.is_ok(), !tls, "port {port}, TLS {tls}");
    }
}

/// A write through the primary reaches both replicas; SIGKILLed, the primary is failed over to
/// the one G8's pin lets the Sentinels promote (the second: without the pin either could win),
/// which the other follows, `+switch-master` says so, and the write is kept; the pin undone. The
/// new primary.
fn a_write_survives_a_failover(engine: &Engine, switch: &mut Subscription) -> NodeId {
    let nodes = engine.nodes();
    let (primary, replicas) = (nodes[0], nodes[1..].to_vec());
    engine
        .node_admin(primary)
        .unwrap()
        .query::<()>(&["SET", KEY, "before"])
        .unwrap();
    for r in &replicas {
        assert_eq!(engine.role(*r), Some(Role::Replica), "{r}");
        engine.wait_in_sync(primary, *r).unwrap();
        let got = engine.node_admin(*r).unwrap().get(KEY).unwrap();
        assert_eq!(got.as_deref(), Some("before"), "{r}");
    }

    let pinned = replicas[1];
    engine.pin_promotion(pinned).unwrap();
    let t1 = Instant::now();
    engine.kill_node(primary).unwrap();
    let new = engine.wait_for_new_primary(primary).unwrap();
    assert_eq!(new, pinned, "the one replica with a priority was promoted");
    engine.unpin_promotion();
    the_pin_is_undone(engine, &replicas);
    assert_eq!(engine.role(new), Some(Role::Primary));
    let other = *replicas.iter().find(|r| **r != new).unwrap();
    engine.wait_following(other, new).unwrap();
    eprintln!("failed over to {new} in {:?}", t1.elapsed());
    let announced = |n| engine.announced_port(n).to_string();
    assert_eq!(
        switched(switch),
        (announced(primary), announced(new)),
        "+switch-master"
    );
    let kept = engine.node_admin(new).unwrap().get(KEY).unwrap();
    assert_eq!(kept.as_deref(), Some("before"), "the write survived");
    new
}

/// Every live data node promotable again, every Sentinel on Valkey's periods.
fn the_pin_is_undone(engine: &Engine, live: &[NodeId]) {
    for n in live {
        let got: Vec<String> = engine
            .node_admin(*n)
            .unwrap()
            .query(&["CONFIG", "GET", "replica-priority"])
            .unwrap();
        assert_eq!(got, ["replica-priority", "100"], "{n}");
    }
    for id in engine.sentinels() {
        let periods: std::collections::BTreeMap<String, String> = engine
            .sentinel_admin(id)
            .unwrap()
            .query(&["SENTINEL", "DEBUG"])
            .unwrap();
        let at = |k: &str| periods.get(k).map(String::as_str);
        assert_eq!(
            (at("INFO-PERIOD"), at("PUBLISH-PERIOD")),
            (Some("10000"), Some("2000")),
            "{id}"
        );
    }
}

/// The old primary (node 0), restarted, is made a replica of `new` and holds the write.
fn the_old_primary_comes_back_as_a_replica(engine: &Engine, new: NodeId) {
    let primary = engine.nodes()[0];
    let t2 = Instant::now();
    engine.restart_node(primary).unwrap();
    engine.wait_following(primary, new).unwrap();
    engine.wait_in_sync(new, primary).unwrap();
    assert_eq!(engine.role(primary), Some(Role::Replica));
    let back = engine.node_admin(primary).unwrap().get(KEY).unwrap();
    assert_eq!(back.as_deref(), Some("before"));
    eprintln!("{primary} back as a replica in {:?}", t2.elapsed());
}

/// The key the failover must keep.
const KEY: &str = "emq:sentinel-test";

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
    if engine.tls().is_some() {
        through_its_tls_front_by_name(engine, s);
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

/// Over TLS, as a connector comes: through Sentinel `s`'s front, its certificate verified by
/// name with the run's CA, the connector's user is named the primary's front, by that name.
fn through_its_tls_front_by_name(engine: &Engine, s: SentinelId) {
    let run = engine.tls().unwrap();
    let front = engine.sentinel_proxy(s).unwrap().port();
    let tls = emq::tls::relay::Back::start(run, ([127, 0, 0, 1], front).into()).unwrap();
    let url = EngineUrl::parse(&engine.sentinel_connector_url(s).unwrap()).unwrap();
    let through = url.with_port(tls.addr().port()).to_string();
    let addr: (String, u16) = Admin::connect(&through)
        .unwrap()
        .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "emq"])
        .unwrap();
    let primary = engine.announced_port(engine.nodes()[0]);
    assert_eq!(addr, ("localhost".to_string(), primary));
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
