//! G8 on the plain cluster (SPEC R8.13): an endpoint the engine leaves unnamed. Every node is
//! set to `cluster-preferred-endpoint-type unknown-endpoint`, so `CLUSTER SLOTS` names no host,
//! `CLUSTER SHARDS` an empty `endpoint`, and every redirect an empty one (`MOVED 12 :7001`).
//!
//! Deterministic by construction, like [`super::migration`]: the harness moves two empty slots
//! between two calls, so each call meets the reply it is meant to meet:
//! - a session connected now reads a slot map without hosts and enqueues on a queue of every
//!   primary;
//! - one queue's slot has moved to another primary since: the enqueue meets `MOVED <slot> :<port>`;
//! - another's slot is migrating, its keys moved: the enqueue meets `ASK <slot> :<port>` (the
//!   source holds none of its keys, the target every key the enqueue declares).
//!
//! Each call must succeed, on the node named. Then both slots go home and the setting is put
//! back on every node, whatever the verdict. Not on a TLS cluster: its nodes are named by host
//! name there (R10.4).

use super::migration::{seeded_pair, slot_of};
use crate::connector::Verbs;
use crate::engine::Engine;
use crate::engine::admin::{Admin, shards};
use crate::engine::migration::SlotMove;
use crate::engine::topology::NodeId;
use crate::gates::{GateContext, GateDb, GateError, GateId, GateOutcome};
use crate::protocol::grammar::{FENCE_KEY, key};

const SESSION: &str = "e";
const SETTING: &str = "cluster-preferred-endpoint-type";
const RULE: &str = "with every node at cluster-preferred-endpoint-type unknown-endpoint, a \
                    session read a slot map without hosts and followed MOVED and ASK that named \
                    no host, to the host of the node that answered (R8.13)";

/// The two queues whose slots move (each alone in its slot, on `from`, not the fence's), and
/// the two primaries.
struct Plan {
    /// A queue on every primary, for the session's first calls.
    each: Vec<String>,
    moved: String,
    asked: String,
    from: NodeId,
    to: NodeId,
}

fn plan(engine: &Engine, admin: &Admin, seed: u64) -> Plan {
    let (from, source, target) = seeded_pair(&engine.primaries(admin), seed, 0xe4d0);
    let fence_slot = shards::slot(FENCE_KEY.as_bytes());
    let each = admin.one_name_per_primary(&format!("g8e-{seed}-each"));
    let taken: Vec<u16> = each
        .iter()
        .map(|q| slot_of(q))
        .chain([fence_slot])
        .collect();
    let mut names = (0..)
        .map(|i| format!("g8e-{seed}-{i}"))
        .filter(|q| admin.shard_of(&key(q, "pending")) == from && !taken.contains(&slot_of(q)));
    let moved = names.next().expect("some name lands on every primary");
    let asked = names
        .find(|q| slot_of(q) != slot_of(&moved))
        .expect("a primary holds many slots");
    Plan {
        each,
        moved,
        asked,
        from: source,
        to: target,
    }
}

/// The phase: on the plain cluster, after the slot migration.
pub fn run(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    if ctx.engine.tls().is_some() {
        return Ok(());
    }
    let GateDb { url, mut admin, .. } = ctx.database(GateId::G8)?;
    let p = plan(ctx.engine, &admin, ctx.seed);
    (ctx.progress)(&format!(
        "G8: every node at {SETTING} unknown-endpoint; queues {} (moved) and {} (migrating)",
        p.moved, p.asked
    ));
    let before = setting(ctx.engine, p.from)?;
    let failed = ctx.engine.config_set_all(SETTING, "unknown-endpoint");
    let mut moved = Vec::new();
    let r = if failed.is_empty() {
        judge(ctx, &url, &p, &mut moved, out)
    } else {
        Err(GateError::instrument(format!(
            "CONFIG SET {SETTING} unknown-endpoint failed on {failed:?}"
        )))
    };
    let restored = ctx.engine.config_set_all(SETTING, &before);
    let home = home(ctx, &mut admin, &p, &moved);
    r?;
    home?;
    if !restored.is_empty() {
        return Err(GateError::instrument(format!(
            "CONFIG SET {SETTING} {before} failed on {restored:?}"
        )));
    }
    Ok(())
}

fn setting(engine: &Engine, node: NodeId) -> Result<String, GateError> {
    let got: Vec<String> =
        engine.on_node(node, "CONFIG GET", |a| a.query(&["CONFIG", "GET", SETTING]))?;
    Ok(got.get(1).cloned().unwrap_or_else(|| "ip".to_string()))
}

/// The calls, and the verdict; `moved` gets each slot the harness gave the target.
fn judge(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
    p: &Plan,
    moved: &mut Vec<u16>,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let Some(mut c) = ctx.connected(SESSION, url, out)? else {
        return Ok(());
    };
    let mut failed = Vec::new();
    let mut note = |what: String, r: Result<String, crate::error::ConnectorError>| {
        if let Err(e) = r {
            failed.push(format!("{what} (kind {}: {})", e.kind, e.message));
        }
    };
    for q in &p.each {
        note(
            format!("enqueue on {q} (a slot map without hosts)"),
            c.enqueue(SESSION, q, "each", 0),
        );
    }
    let mut mv = SlotMove::begin(ctx.engine, slot_of(&p.moved), p.from, p.to)?;
    mv.move_keys()?;
    mv.finish(ctx.engine)?;
    moved.push(slot_of(&p.moved));
    let said = redirect_of(ctx.engine, p.from, &p.moved)?;
    note(
        format!("enqueue on {} (the source answered {said})", p.moved),
        c.enqueue(SESSION, &p.moved, "moved", 0),
    );
    // Every key the enqueue declares (`pending`, `delayed`, `seq`) on the target before the
    // call, so the target runs it after ASKING (a missing one is TRYAGAIN's, R8.7).
    note(
        format!("enqueue on {} (before its migration)", p.asked),
        c.enqueue(SESSION, &p.asked, "first", 0),
    );
    note(
        format!("enqueue on {} (before its migration)", p.asked),
        c.enqueue(SESSION, &p.asked, "later", 3_600_000),
    );
    let mut asking = SlotMove::begin(ctx.engine, slot_of(&p.asked), p.from, p.to)?;
    asking.move_keys()?;
    let said_ask = redirect_of(ctx.engine, p.from, &p.asked)?;
    note(
        format!("enqueue on {} (the source answered {said_ask})", p.asked),
        c.enqueue(SESSION, &p.asked, "asked", 0),
    );
    asking.finish(ctx.engine)?;
    moved.push(slot_of(&p.asked));
    ctx.engine.mark_health();
    let port = ctx.engine.announced_port(p.to);
    if said != format!("MOVED {} :{port}", slot_of(&p.moved))
        || said_ask != format!("ASK {} :{port}", slot_of(&p.asked))
    {
        return Err(GateError::instrument(format!(
            "the engine did not redirect without a host as planned: {said}; {said_ask}"
        )));
    }
    let landed = on_target(ctx.engine, p)?;
    out.figure("unknown_endpoint_redirects", format!("{said}; {said_ask}"));
    if !failed.is_empty() {
        out.fail(format!("{RULE}: {}", failed.join("; ")));
    } else if landed != 2 {
        out.fail(format!(
            "{RULE}: every call answered, yet {landed} of the 2 redirected jobs are on the node \
             named"
        ));
    } else {
        out.pass(RULE);
    }
    Ok(())
}

/// What node `from` answers a command on `q`'s key: its redirect, in the engine's words.
fn redirect_of(engine: &Engine, from: NodeId, q: &str) -> Result<String, GateError> {
    let k = key(q, "pending");
    let said = engine.on_node(from, "ZCARD", |a| a.redirect_for(&["ZCARD", &k]))?;
    Ok(said.unwrap_or_else(|| "no redirect".to_string()))
}

/// How many of the two redirected queues hold on the target the pending jobs they should: the
/// moved one its one, the migrated one its first and the one sent under `ASK`.
fn on_target(engine: &Engine, p: &Plan) -> Result<usize, GateError> {
    let mut n = 0;
    for (q, want) in [(&p.moved, 1), (&p.asked, 2)] {
        let k = key(q, "pending");
        let at: i64 = engine.on_node(p.to, "ZCARD", |a| a.query(&["ZCARD", &k]))?;
        n += usize::from(at == want);
    }
    Ok(n)
}

/// The phase's keys gone (every queue's key carries its tag `{g8e-<seed>-…}`), then the slots
/// it gave the target home again, empty.
fn home(
    ctx: &GateContext<'_>,
    admin: &mut Admin,
    p: &Plan,
    moved: &[u16],
) -> Result<(), GateError> {
    ctx.engine.refresh(admin)?;
    let tag = format!("{{g8e-{}-", ctx.seed);
    for k in admin.keys()?.into_iter().filter(|k| k.contains(&tag)) {
        admin.query::<i64>(&["DEL", &k])?;
    }
    for &slot in moved {
        let mut back = SlotMove::begin(ctx.engine, slot, p.to, p.from)?;
        back.move_keys()?;
        back.finish(ctx.engine)?;
    }
    ctx.engine.mark_health();
    ctx.engine.refresh(admin)?;
    Ok(())
}
