//! G5 pipeline (SPEC §4, §6): a 10 000-command pipeline of `INCR` on a probe key returns
//! 1..=10000 in order; a pipelined `EVALSHA` batch of `ctx.batch` enqueues, begun on an empty
//! script cache, lands whole (the reply, `pending_size`, the counter and the first and last ids
//! agree); its ops/s is a figure.
//!
//! Right replies do not prove pipelining: a connector sending one command per round trip gets
//! them too. So the gate judges it without timing, through the fault proxy (its own on one
//! engine; on a cluster the one the key's node announces), which withholds every reply until all
//! `n` commands of the probe (and a whole pipeline of a batch) have arrived
//! ([`crate::faults::Proxy::hold`]); a connector that waits for a reply sends one and stalls, and
//! the proxy counts that. The engine's socket reads (`INFO stats` `total_reads_processed`) are
//! figures; they stay a verdict only for the spread batch on a cluster (R8.3: each node's share
//! pipelined), where the margin, under one read per 10 commands, is wide.

use std::time::Instant;

use serde::Serialize;

use crate::connector::{Connector, Verbs};
use crate::engine::admin::Admin;
use crate::error::ConnectorError;
use crate::gates::{GateContext, GateDb, GateError, GateOutcome};
use crate::protocol::grammar::{job_id, key};

/// Commands in the probe pipeline.
const PROBE_N: i64 = 10_000;
/// Enqueues per pipeline in the batch.
const DEPTH: i64 = 1000;
/// What a certifying run needs.
const CERTIFY: i64 = 100_000;
const QUEUE: &str = "g5";
/// Commands per engine read that pipelining must reach, at least (R4.11, R4.12).
const PER_READ: i64 = 10;

/// Queues in the spread batch (R4.12, R8.3).
const SPREAD: usize = 12;

/// Each node's `total_reads_processed` (server-wide socket reads; every primary of a cluster).
fn reads_each(admin: &mut crate::engine::admin::Admin) -> Result<Vec<i64>, GateError> {
    admin
        .info_each("stats")?
        .iter()
        .map(|stats| {
            stats
                .get("total_reads_processed")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| GateError::instrument("INFO stats has no total_reads_processed"))
        })
        .collect()
}

/// The reads all nodes made, less the admin's own `INFO` read on each.
fn reads(admin: &mut crate::engine::admin::Admin) -> Result<i64, GateError> {
    let each = reads_each(admin)?;
    Ok(each.iter().sum::<i64>() - each.len() as i64 + 1)
}

/// Records the engine reads a pipelined call of `n` commands cost, as a figure: the withheld
/// replies ([`held`]) judge pipelining without timing, on every engine. `before` and `after`
/// each include the admin's own `INFO` read, which is taken off.
fn note_reads(out: &mut GateOutcome, what: &str, before: i64, after: i64) {
    let used = (after - before - 1).max(0);
    out.figure(&format!("{what}_reads"), used);
}

/// The gate's check; an `Err` is the gate's ERROR ([`crate::gates::run_gate`] records it).
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { url, mut admin, .. } = ctx.database(crate::gates::GateId::G5)?;
    let Some(mut c) = ctx.connected("s", &url, out)? else {
        return Ok(());
    };
    probe(ctx, c.as_mut(), &mut admin, out)?;
    if !batch(ctx, c.as_mut(), &mut admin, out)? {
        return Ok(());
    }
    landed_whole(ctx.batch, c.as_mut(), &mut admin, out)?;
    spread(ctx, out, c.as_mut(), &mut admin)?;
    held(ctx, out, &url, &admin)
}

/// 1. The probe: outside the EchoMQ namespace.
fn probe(
    ctx: &GateContext<'_>,
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let probe = format!("emq-probe:{}", ctx.seed);
    let r0 = reads(admin)?;
    let t0 = Instant::now();
    match c.pipeline_probe("s", &probe, PROBE_N) {
        Ok(v) => {
            out.figure("probe_ms", t0.elapsed().as_millis() as u64);
            let r1 = reads(admin)?;
            note_reads(out, "probe", r0, r1);
            let first_bad = v.iter().enumerate().find(|(i, x)| **x != *i as i64 + 1);
            let ok = v.len() == PROBE_N as usize && first_bad.is_none();
            let what = match first_bad {
                Some((i, x)) => format!("; reply {} is {x}", i + 1),
                None if !ok => format!("; {} replies", v.len()),
                None => String::new(),
            };
            out.check(
                ok,
                format!("a pipeline of {PROBE_N} INCR on the probe key returned 1..={PROBE_N} in order{what}"),
            );
            let stored = admin.get(&probe)?;
            out.check(
                stored.as_deref() == Some(&PROBE_N.to_string()),
                format!("the probe key holds {PROBE_N} afterwards"),
            );
        }
        Err(e) => {
            out.fail(format!("pipeline_probe failed ({})", e.evidence()));
            out.figure("probe_error", e.message);
        }
    }
    Ok(())
}

/// 2. The batch of `ctx.batch` enqueues, timed. False when it failed (recorded in `out`).
fn batch(
    ctx: &GateContext<'_>,
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    out: &mut GateOutcome,
) -> Result<bool, GateError> {
    let n = ctx.batch;
    (ctx.progress)(&format!("G5: a batch of {n} enqueues"));
    if n < CERTIFY {
        out.pass(format!(
            "batch of {n} enqueues (not certifying: a certifying run uses ≥ {CERTIFY})"
        ));
    }
    let loads0 = empty_script_cache(admin)?;
    // Timed by the same code as `emq-gate bench`, so the record's ops/s means the same thing.
    let r0 = reads(admin)?;
    match time_batch(c, "s", QUEUE, n, DEPTH, "x") {
        Ok(t) => {
            let r1 = reads(admin)?;
            note_reads(out, "batch", r0, r1);
            out.figure("batch_script_loads", script_loads(admin)? - loads0);
            out.pass(EMPTY_CACHE);
            let got = t.done;
            out.figure("batch_ms", (t.secs * 1e3).round() as u64);
            out.figure("batch_ops_per_s", t.ops_per_s.round() as u64);
            out.check(got == n, format!("batch({n}, depth {DEPTH}) replied {got}"));
            Ok(true)
        }
        Err(e) => {
            out.fail(format!("batch failed ({})", e.evidence()));
            out.figure("batch_error", e.message);
            Ok(false)
        }
    }
}

/// Why each batch starts on an empty script cache: a pipeline whose enqueues answer `NOSCRIPT`
/// must send exactly those again after one load. A gate run in which G2 or G3 went first would
/// find the script loaded, and a connector that counts a `NOSCRIPT` as landed (Debian's eredis 1.2
/// reads an error reply split across two socket reads as a value) passed when G5 ran late.
const EMPTY_CACHE: &str = "the batch began on an empty script cache (SCRIPT FLUSH on every primary): its first pipeline met NOSCRIPT, and only a connector that sends those enqueues again after a SCRIPT LOAD lands it whole";

/// `SCRIPT FLUSH` on every primary; the `SCRIPT LOAD`s counted so far (all nodes).
fn empty_script_cache(admin: &mut Admin) -> Result<u64, GateError> {
    admin.script_flush()?;
    script_loads(admin)
}

fn script_loads(admin: &mut Admin) -> Result<u64, GateError> {
    Ok(admin
        .commandstats_each()?
        .iter()
        .map(|m| m.get("script|load").copied().unwrap_or(0))
        .sum())
}

/// The batch of `n` landed whole: `pending_size`, the counter, the first and last ids agree.
fn landed_whole(
    n: i64,
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    match c.pending_size("s", QUEUE) {
        Ok(size) => {
            out.check(size == n, format!("pending_size is {size} (batch of {n})"));
        }
        Err(e) => out.fail(format!("pending_size failed ({})", e.evidence())),
    };
    let seq = admin.get(&key(QUEUE, "seq"))?;
    out.check(
        seq == Some(n.to_string()),
        format!(
            "{} is {} (batch of {n})",
            key(QUEUE, "seq"),
            seq.as_deref().unwrap_or("absent")
        ),
    );
    let pending = key(QUEUE, "pending");
    let first: Vec<String> = admin.query(&["ZRANGE", &pending, "0", "0"])?;
    let last: Vec<String> = admin.query(&["ZRANGE", &pending, "-1", "-1"])?;
    let want = [job_id(1), job_id(n.max(1) as u64)];
    out.check(
        first.first() == Some(&want[0]) && last.first() == Some(&want[1]),
        format!("pending runs from {} to {}", want[0], want[1]),
    );
    Ok(())
}

/// The proxy that carries `key`'s commands: on one engine a proxy of the check's own (kept in
/// `own`), with the url through it; on a cluster the proxy the key's node announces, and the url
/// as it is (the seed is a proxy too).
fn proxy_for<'a, 'c: 'a>(
    ctx: &'c GateContext<'_>,
    admin: &crate::engine::admin::Admin,
    url: &crate::engine::Target,
    key: &str,
    own: &'a mut Option<crate::gates::GateProxy<'c>>,
) -> Result<(&'a crate::faults::Proxy, crate::engine::Target), GateError> {
    if ctx.engine.is_cluster() {
        let node = ctx.engine.primary_of(admin, key)?;
        let p = ctx.engine.proxy_of(node)?;
        return Ok((p, url.clone()));
    }
    let (p, through) = ctx.proxied(url)?;
    Ok((own.insert(p), through))
}

/// How long the proxy waits for another held command before it lets the replies go: far above
/// the gap between two writes of a connector that is sending. A batch's window waits for one
/// enqueue past `depth`, which a correct connector never sends, so every connector pays it once
/// there, and a read timeout shorter than this fails G5 (SPEC P4.11 sets 3 s at least).
const QUIET: std::time::Duration = std::time::Duration::from_secs(2);

/// Part 4, one engine (R4.11, R4.12): through the proxy, with every reply withheld, the probe's
/// `n` `INCR` and the first `depth` enqueues of a batch must all arrive before any reply does.
/// Nothing here depends on timing but [`QUIET`].
fn held(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    url: &crate::engine::Target,
    admin: &crate::engine::admin::Admin,
) -> Result<(), GateError> {
    use crate::faults::Matcher;
    let probe = format!("emq-probe:{}:held", ctx.seed);
    let mut own = None;
    let (proxy, through) = proxy_for(ctx, admin, url, &probe, &mut own)?;
    (ctx.progress)("G5: the probe and a batch with every reply withheld");
    let Some(mut c) = ctx.connected("h", &through, out)? else {
        return Ok(());
    };
    proxy.hold(
        Matcher {
            name: Some("INCR".into()),
            arg1: Some(probe.clone()),
            nth_of_connection: None,
        },
        PROBE_N as u64,
        QUIET,
        1,
        PROBE_N as u64,
    );
    // Held until every INCR arrived or the window stayed quiet: a wait, not work.
    let probe_ok = out.waiting(|| c.pipeline_probe("h", &probe, PROBE_N));
    let (seen, others) = proxy.take_hold();
    let seen = seen.unwrap_or(0);
    out.figure("held_probe_commands", seen);
    match probe_ok {
        Ok(v) if v.len() == PROBE_N as usize => {}
        Ok(v) => out.fail(format!("the held probe returned {} replies", v.len())),
        Err(e) => out.fail(format!("the held probe failed ({})", e.evidence())),
    }
    out.check(
        seen == PROBE_N as u64,
        format!(
            "pipeline_probe sent all {PROBE_N} INCR {probe} before reading any reply (replies withheld until they arrived; {})",
            held_probe_words(seen, PROBE_N as u64, &others, &probe)
        ),
    );
    // On a cluster the batch's queue is on its own node, behind that node's proxy.
    if ctx.engine.is_cluster() {
        let mut own = None;
        let (p, _) = proxy_for(ctx, admin, url, "g5h", &mut own)?;
        return held_batch(out, c.as_mut(), p);
    }
    held_batch(out, c.as_mut(), proxy)
}

/// The batch of part 4, through `proxy` (the one that carries queue `g5h`).
fn held_batch(
    out: &mut GateOutcome,
    c: &mut (dyn Connector + Send),
    proxy: &crate::faults::Proxy,
) -> Result<(), GateError> {
    use crate::faults::Matcher;
    // Any EVALSHA: the batch is all this session sends (a connector that sends foreign scripts
    // is G2's to judge, not this check's).
    // Two windows: a connector may send one enqueue alone first (to load the script), then its
    // pipelines; its best window must hold a whole pipeline, and no more: the hold waits for one
    // enqueue past `depth`, which only a connector whose pipelines are deeper than asked sends.
    // A first window that held a whole pipeline is the last: of the batch's 2 × depth enqueues
    // one pipeline is left, which cannot hold more than depth (one quiet wait, not two).
    proxy.hold(
        Matcher {
            name: Some("EVALSHA".into()),
            arg1: None,
            nth_of_connection: None,
        },
        DEPTH as u64 + 1,
        QUIET,
        2,
        DEPTH as u64,
    );
    let done = out.waiting(|| c.batch("h", "g5h", 2 * DEPTH, DEPTH, "z"));
    let (seen, others) = proxy.take_hold();
    let seen = seen.unwrap_or(0);
    out.figure("held_batch_commands", seen);
    if let Err(e) = done {
        out.fail(format!("the held batch failed ({})", e.evidence()));
    }
    out.check(
        seen == DEPTH as u64,
        format!(
            "batch sent a pipeline of {DEPTH} enqueues, no fewer and no more, before reading any of its replies (at most one lone call first; {})",
            held_batch_words(seen, &others)
        ),
    );
    Ok(())
}

/// What the held probe saw, in words. Only `INCR <key>` is the probe (SPEC R4.11): a connector
/// that sent `INCRBY key 1` never waited, so say what arrived instead of that it waited.
fn held_probe_words(seen: u64, until: u64, others: &[(String, u64)], probe: &str) -> String {
    let incrby = others
        .iter()
        .find(|(what, _)| what == &format!("INCRBY {probe}"));
    match incrby {
        Some((_, n)) if seen < until => format!(
            "{seen} INCR arrived, and {n} INCRBY {probe} instead: R4.11's probe is INCR itself, and INCRBY key 1 (what redis-py's incr() sends) is not counted; send INCR"
        ),
        _ => held_words(seen, until, "INCR", others),
    }
}

/// What the held batch saw, in words: a pipeline deeper than `depth` is named as such.
fn held_batch_words(seen: u64, others: &[(String, u64)]) -> String {
    if seen > DEPTH as u64 {
        return format!(
            "{seen} EVALSHA arrived before any reply was read: its pipelines are deeper than the depth {DEPTH} it was asked for"
        );
    }
    held_words(seen, DEPTH as u64, "EVALSHA", others)
}

/// `seen` held commands named `name`, and what else arrived meanwhile: a connector that waited
/// sent one and stalled; one that sent something else is told what it sent.
fn held_words(seen: u64, until: u64, name: &str, others: &[(String, u64)]) -> String {
    if seen >= until {
        return format!("{seen} {name} arrived");
    }
    if others.is_empty() {
        return format!(
            "{seen} {name} arrived before the connector stopped sending and waited for a reply"
        );
    }
    let list: Vec<String> = others.iter().map(|(w, n)| format!("{n} × {w}")).collect();
    format!(
        "{seen} {name} arrived before the connector stopped sending; meanwhile it sent {}",
        list.join(", ")
    )
}

/// Part 3, one batch over [`SPREAD`] queues (R4.12): every queue gets its share in order; on a
/// cluster the queues cover every primary and each primary's share arrives pipelined (R8.3).
fn spread(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    c: &mut (dyn Connector + Send),
    admin: &mut crate::engine::admin::Admin,
) -> Result<(), GateError> {
    // One queue per primary first (a cluster), then enough more to make SPREAD.
    let queues = admin.names_over_primaries("g5s", SPREAD);
    let per = DEPTH;
    let n = per * SPREAD as i64;
    (ctx.progress)(&format!("G5: a batch of {n} enqueues over {SPREAD} queues"));
    // Each node's first pipeline meets NOSCRIPT, loaded on that node (R8.2).
    empty_script_cache(admin)?;
    let before = reads_each(admin)?;
    let done = match c.batch_over("s", &queues, n, DEPTH, "y") {
        Ok(done) => done,
        Err(e) => {
            out.fail(format!(
                "a batch over {SPREAD} queues failed ({})",
                e.evidence()
            ));
            out.figure("spread_error", e.message);
            return Ok(());
        }
    };
    let after = reads_each(admin)?;
    out.check(
        done == n,
        format!("batch({n}) over {SPREAD} queues replied {done}"),
    );
    let mut short = Vec::new();
    let mut per_node = vec![0i64; before.len()];
    for q in &queues {
        let size: i64 = admin.query(&["ZCARD", &key(q, "pending")])?;
        let first: Vec<String> = admin.query(&["ZRANGE", &key(q, "pending"), "0", "0"])?;
        let last: Vec<String> = admin.query(&["ZRANGE", &key(q, "pending"), "-1", "-1"])?;
        if size != per
            || first.first() != Some(&job_id(1))
            || last.first() != Some(&job_id(per as u64))
        {
            short.push(format!("{q}: {size}"));
        }
        if let Some(slot) = per_node.get_mut(admin.shard_of(&key(q, "pending"))) {
            *slot += per;
        }
    }
    out.none_of(
        &short,
        &format!(
            "each of the {SPREAD} queues holds its {per} jobs, {} to {}",
            job_id(1),
            job_id(per as u64)
        ),
        "queues short",
    );
    let mut unpipelined = Vec::new();
    for (i, cmds) in per_node.iter().enumerate() {
        let used = (after[i] - before[i] - 1).max(0);
        out.figure(&format!("spread_reads_node{i}"), used);
        if *cmds > 0 && used >= cmds / PER_READ {
            unpipelined.push(format!("node {i}: {used} reads for {cmds} commands"));
        }
    }
    let nodes = per_node.iter().filter(|c| **c > 0).count();
    if !ctx.engine.is_cluster() {
        return Ok(());
    }
    out.none_of(
        &unpipelined,
        &format!(
            "each of the {nodes} node(s) serving them received its share in fewer than one read per {PER_READ} commands (pipelined per node)"
        ),
        "not pipelined",
    );
    Ok(())
}

/// One timed batch of enqueues through a connector.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BatchTiming {
    /// Enqueues asked for.
    pub n: i64,
    /// Enqueues per pipeline.
    pub depth: i64,
    /// Enqueues the connector says landed.
    pub done: i64,
    /// Wall time of the `batch` call alone, seconds.
    pub secs: f64,
    /// `n / secs`.
    pub ops_per_s: f64,
}

/// Times one `batch(n, depth)` call on an already connected `session`: the wall clock around the
/// call and nothing else. The one measurement both G5 and `emq-gate bench` use.
pub fn time_batch<C: Connector + ?Sized>(
    c: &mut C,
    session: &str,
    queue: &str,
    n: i64,
    depth: i64,
    payload: &str,
) -> Result<BatchTiming, ConnectorError> {
    let t0 = Instant::now();
    let done = c.batch(session, queue, n, depth, payload)?;
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    Ok(BatchTiming {
        n,
        depth,
        done,
        secs,
        ops_per_s: n as f64 / secs,
    })
}
