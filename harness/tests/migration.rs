//! What SPEC §8 (R8.6, R8.7) says the engine does to EchoMQ's scripts during a live slot
//! migration, shown on a live cluster with the harness's own [`SlotMove`] and raw commands (no
//! connector): while a slot is marked migrating with its keys still on the source, `enqueue`
//! stops part-way ("non local key": the counter moved, no job made); once the keys moved, the
//! source answers `ASK`; the target runs the call after `ASKING` when it holds every declared key
//! and answers `TRYAGAIN` when it lacks one; after the migration the source answers `MOVED`.
//! The atomic way ([`migrate_atomic`], R8.6) moves the slot whole with no `ASK`, then `MOVED`.

mod common;

use emq::engine::Admin;
use emq::engine::admin::shards;
use emq::engine::migration::{SlotMove, has_atomic, migrate_atomic};
use emq::protocol::grammar::{job_root, key};

fn eval(a: &mut Admin, script: &str, keys: &[String], args: &[&str]) -> Result<String, String> {
    let mut cmd = vec!["EVAL", script];
    let n = keys.len().to_string();
    cmd.push(&n);
    cmd.extend(keys.iter().map(String::as_str));
    cmd.extend(args);
    a.query::<redis::Value>(&cmd)
        .map(|v| format!("{v:?}"))
        .map_err(|e| e.to_string())
}

/// A cluster, a queue on its first primary with a pending and a delayed job (every declared key
/// of enqueue exists), and what a test needs to call enqueue by hand on either side.
struct Setup {
    engine: emq::engine::Engine,
    bundle: std::sync::Arc<emq::protocol::bundle::Bundle>,
    q: String,
    slot: u16,
    from: emq::engine::topology::NodeId,
    to: emq::engine::topology::NodeId,
    src: Admin,
    dst: Admin,
    keys: [String; 3],
    root: String,
}

fn setup(prefix: &str) -> Setup {
    let engine = common::cluster_engine();
    let bundle = common::bundle();
    let admin = engine.admin(0).unwrap();
    let primaries = engine.primaries(&admin);
    let q = admin.one_name_per_primary(prefix)[0].clone();
    let slot = shards::slot(key(&q, "pending").as_bytes());
    let (from, to) = (primaries[0], primaries[1]);
    let mut src = engine.node_admin(from).unwrap();
    let dst = engine.node_admin(to).unwrap();
    let keys = [key(&q, "pending"), key(&q, "delayed"), key(&q, "seq")];
    let root = job_root(&q);
    let enqueue = String::from_utf8(bundle.script("enqueue").source.clone()).unwrap();
    eval(&mut src, &enqueue, &keys, &[&root, "p", "0"]).unwrap();
    eval(&mut src, &enqueue, &keys, &[&root, "d", "3600000"]).unwrap();
    Setup {
        engine,
        bundle,
        q,
        slot,
        from,
        to,
        src,
        dst,
        keys,
        root,
    }
}

#[test]
fn a_live_migration_does_to_the_scripts_what_spec_says() {
    let Setup {
        engine,
        bundle,
        q,
        slot,
        from,
        to,
        mut src,
        mut dst,
        keys,
        root,
    } = setup("mig");
    let enqueue = String::from_utf8(bundle.script("enqueue").source.clone()).unwrap();

    let mut mv = SlotMove::begin(&engine, slot, from, to).unwrap();
    let e = eval(&mut src, &enqueue, &keys, &[&root, "x", "0"]).unwrap_err();
    assert!(e.contains("non local key"), "{e}");
    let seq: String = src.query(&["GET", &key(&q, "seq")]).unwrap();
    assert_eq!(seq, "3", "the counter moved before the script stopped");
    assert_eq!(
        src.query::<u64>(&["ZCARD", &key(&q, "pending")]).unwrap(),
        1
    );

    assert!(mv.move_keys().unwrap() >= 4);
    let e = eval(&mut src, &enqueue, &keys, &[&root, "x", "0"]).unwrap_err();
    assert!(e.contains("Ask") || e.contains("ASK"), "{e}");
    // On the target with ASKING, every declared key present: the call runs.
    dst.query::<()>(&["ASKING"]).unwrap();
    eval(&mut dst, &enqueue, &keys, &[&root, "y", "0"]).unwrap();
    // A claim's `active` does not exist anywhere yet: TRYAGAIN, nothing ran.
    let claim = String::from_utf8(bundle.script("claim").source.clone()).unwrap();
    dst.query::<()>(&["ASKING"]).unwrap();
    let ck = [key(&q, "pending"), key(&q, "active")];
    let e = eval(&mut dst, &claim, &ck, &[&root, "1000"]).unwrap_err();
    assert!(e.contains("TryAgain") || e.contains("TRYAGAIN"), "{e}");
    dst.query::<()>(&["ASKING"]).unwrap();
    assert_eq!(
        dst.query::<u64>(&["ZCARD", &key(&q, "pending")]).unwrap(),
        2
    );

    mv.finish(&engine).unwrap();
    let e = eval(&mut src, &claim, &ck, &[&root, "1000"]).unwrap_err();
    assert!(e.contains("Moved") || e.contains("MOVED"), "{e}");
    eval(&mut dst, &claim, &ck, &[&root, "1000"]).unwrap();
}

#[test]
fn an_atomic_migration_moves_the_slot_whole_then_answers_moved() {
    let mut s = setup("amig");
    let enqueue = String::from_utf8(s.bundle.script("enqueue").source.clone()).unwrap();
    let mut admin = s.engine.admin(0).unwrap();
    assert!(
        has_atomic(&mut admin).unwrap(),
        "Valkey 9.1 has CLUSTER MIGRATESLOTS"
    );
    let args = |name: &'static str| [s.root.clone(), name.to_string(), "0".to_string()];

    let moved = migrate_atomic(&s.engine, s.slot, s.from, s.to).unwrap();
    assert_eq!(moved.state, "success");
    let x = args("x");
    let e = eval(&mut s.src, &enqueue, &s.keys, &[&x[0], &x[1], &x[2]]).unwrap_err();
    assert!(e.contains("Moved") || e.contains("MOVED"), "{e}");
    // Every key came along: the counter goes on from 2, both jobs are where they were.
    let y = args("y");
    eval(&mut s.dst, &enqueue, &s.keys, &[&y[0], &y[1], &y[2]]).unwrap();
    let count = |a: &mut Admin, set: &str| a.query::<u64>(&["ZCARD", &key(&s.q, set)]).unwrap();
    assert_eq!(s.dst.get(&key(&s.q, "seq")).unwrap().as_deref(), Some("3"));
    assert_eq!(
        (count(&mut s.dst, "pending"), count(&mut s.dst, "delayed")),
        (2, 1)
    );
    // And home again.
    migrate_atomic(&s.engine, s.slot, s.to, s.from).unwrap();
    let z = args("z");
    eval(&mut s.src, &enqueue, &s.keys, &[&z[0], &z[1], &z[2]]).unwrap();
}
