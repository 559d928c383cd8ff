//! G8 atomicity (SPEC §4, §6), in three phases.
//!
//! (a) Command discipline: over a workload of every verb, the only commands from the connector's
//! connections that name an EchoMQ key are `EVALSHA`/`EVAL` of bundle scripts, the reads
//! `ZRANGE`/`ZCARD`/`HGET`/`HMGET`, and `HGETALL`/`HMGET`/`HSETNX` on `emq:fence`; `INCR` only on the
//! probe key. Keyless commands are free.
//!
//! (b) Faults ([`fault_phase`]): the connector talks to the engine through the harness's fault
//! proxy ([`crate::faults`]); every mutating verb meets every fault (lost reply, dropped before
//! forwarding, reply cut, reply delayed) on its own `EVALSHA`, in a seeded schedule, and each call
//! is judged by the accounting of indeterminate calls ([`accounting`]). Deterministic: a connector
//! that re-sends after a lost reply, or answers for a call it could not know, fails on every run.
//! On a cluster every node has its proxy (its clients reach it through one), and the graceful
//! failover of [`failover`] follows, then the two unclean ones of [`unclean`] (a primary killed,
//! a primary stalled) under a crew of the connector's sessions, every acknowledged job
//! attributed to the engine or to the connector, then the slot migration of [`migration`].
//! Behind Sentinel `READONLY` and `SENTINEL FAILOVER` ([`sentinel`]), then the crew through
//! another `SENTINEL FAILOVER` and the same two unclean failovers, the Sentinels promoting.
//!
//! (c) Crash injection: a seeded worker loop (claim → complete / retry / abandon, reap, promote)
//! while ≥ 100 connections are killed on the engine (`CLIENT KILL`) at random points — before a call
//! or while it is in flight — and, for a child connector, the process is killed too. Each crash is
//! followed by a fresh connector. Then a drain, and the accounting: no job lost (gone without a
//! complete sent), none duplicated (in two sets, completed twice, or completed yet present), no
//! orphan hash or member, no keyspace violation. Where the kills land varies from run to run, so
//! this phase can only add evidence against a broken connector; the faults a correct connector must
//! survive, and the breakages the gate must catch, are the fault phase's, which does not vary.

pub mod accounting;
pub mod crashes;
mod drain;
pub mod endpoints;
pub mod failover;
pub mod fault_phase;
pub mod late_reply;
mod ledger;
pub mod migration;
mod plan;
pub mod sentinel;
pub mod unclean;

use crashes::crashes;

use std::collections::BTreeSet;

use self::plan::Plan;
use crate::connector::Verbs;
use crate::connector::starts::StartReason;
use crate::error::ConnectorError;
use crate::gates::{GateContext, GateDb, GateError, GateId, GateOutcome};
use crate::observe::{Watch, every_transition, keys_of, names_emq_key, stable};
use crate::protocol::bundle::sha1_hex;

/// The worker's retry bound and session, shared by the fault and crash phases.
const MAX_ATTEMPTS: i64 = 5;
const SESSION: &str = "w";

/// How many connectors the crash phase of `seed` uses one after another, a killable connector
/// being killed at the planned points: its first, and the replacement of each planned kill.
pub fn crash_connectors(seed: u64) -> usize {
    Plan::new(seed, true).process_kills() + 1
}

/// The gate's check; an `Err` is the gate's ERROR ([`crate::gates::run_gate`] records it).
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    // The late reply (one engine) waits 1.5 s: it runs beside the phases after the discipline, on
    // a database of its own.
    let reach = crate::gates::beside::Reach::Gate;
    crate::gates::beside::with_part(
        ctx,
        GateId::G8,
        out,
        late_reply::run,
        reach,
        |out, beside| phases(ctx, out, beside),
    )
}

/// G8's phases in order; the late reply stands where `beside` is reached.
fn phases(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    beside: &mut crate::gates::beside::Beside<'_, '_, '_>,
) -> Result<(), GateError> {
    // The crash phase's replacements start now, all at once, while the first phases run
    // (issue #24); idle processes (G7's) count among them.
    if ctx.factory.killable() {
        ctx.factory
            .warm(crash_connectors(ctx.seed), StartReason::Killed);
    }
    discipline(ctx, out)?;
    // The discipline's first calls met an empty script cache; the late reply may load it now.
    beside.start();
    // The fault phase runs on every engine (on a cluster through the proxy of each node); a
    // cluster adds its failover (R8.4).
    fault_phase::run(ctx, out)?;
    if ctx.engine.is_cluster() {
        failover::run(ctx, out)?;
        unclean::run(ctx, out)?;
        migration::run(ctx, out)?;
        endpoints::run(ctx, out)?;
    } else {
        beside.here(out)?;
        // Behind Sentinel: READONLY, then a failover, then the two unclean ones (R11.3).
        if ctx.engine.kind == crate::engine::EngineKind::Sentinel {
            sentinel::run(ctx, out)?;
            unclean::run(ctx, out)?;
        }
    }
    crashes(ctx, out)
}

/// Why a connector command breaks the discipline, if it does.
fn breach(args: &[String], shas: &BTreeSet<String>, probe: &str) -> Option<String> {
    let cmd = args[0].to_ascii_uppercase();
    let keys = keys_of(args).unwrap_or_default();
    if cmd == "INCR" {
        return (keys != [probe])
            .then(|| format!("INCR on {}", stable(keys.first().unwrap_or(&""))));
    }
    if !names_emq_key(args) {
        return None;
    }
    let first = keys.iter().find(|k| k.starts_with("emq:")).map_or_else(
        || {
            args.iter()
                .skip(1)
                .find(|a| a.starts_with("emq:"))
                .cloned()
                .unwrap_or_default()
        },
        |k| (*k).to_string(),
    );
    match cmd.as_str() {
        "EVALSHA" | "EVALSHA_RO" => {
            let sha = args
                .get(1)
                .map(|s| s.to_ascii_lowercase())
                .unwrap_or_default();
            (!shas.contains(&sha))
                .then(|| format!("EVALSHA of a foreign script {sha} (not a bundle script)"))
        }
        "EVAL" | "EVAL_RO" => {
            let sha = sha1_hex(args.get(1).map_or(&b""[..], |s| s.as_bytes()));
            (!shas.contains(&sha)).then(|| format!("EVAL of a foreign script {sha}"))
        }
        _ if crate::protocol::commands::may_name(&cmd, &keys) => None,
        _ => Some(format!("{cmd} on {}", stable(&first))),
    }
}

fn discipline(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { db, url, mut admin } = ctx.database(GateId::G8)?;
    let shas: BTreeSet<String> = ctx
        .bundle
        .scripts
        .iter()
        .map(|s| s.entry.sha1.clone())
        .collect();
    let probe = format!("emq-probe:{}", ctx.seed);
    (ctx.progress)("G8: command discipline under MONITOR");
    let watch = Watch::start(&mut admin, db, &[])?;
    let mut c = ctx.factory.make()?;
    let work = (|| {
        c.connect("s", &url)?;
        every_transition(&mut *c, "s", "g8")?;
        c.connect("t", &url)?;
        every_transition(&mut *c, "t", "g8.other")?;
        c.pipeline_probe("s", &probe, 100)?;
        c.batch("s", "g8", 50, 10, "batched")?;
        c.browse("t", "g8", 0, 100)?;
        c.pending_size("t", "g8")?;
        c.disconnect("t")?;
        c.disconnect("s")?;
        Ok::<_, ConnectorError>(())
    })();
    let obs = watch.stop()?;
    if let Err(e) = work {
        out.fail(format!("the discipline workload failed ({})", e.evidence()));
        out.figure("discipline_error", e.message);
    }
    if obs.every_command().next().is_none() {
        return Err(GateError::instrument(
            "MONITOR saw no command from the connector",
        ));
    }
    let breaches: BTreeSet<String> = obs
        .every_command()
        .filter_map(|(_, a)| breach(a, &shas, &probe))
        .collect();
    out.figure(
        "discipline_commands_seen",
        obs.every_command().count() as u64,
    );
    out.check(
        breaches.is_empty(),
        format!(
            "command discipline: every command from the connector naming an EchoMQ key was a bundle \
             script, a read (ZRANGE/ZCARD/HGET/HMGET) or the fence read/install; INCR only on the probe key{}",
            if breaches.is_empty() {
                String::new()
            } else {
                format!("; breaches: {breaches:?}")
            }
        ),
    );
    Ok(())
}

/// A fresh connector with `SESSION` open (kills may land during the connect: try again).
pub(super) fn fresh(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
) -> Result<Box<dyn crate::connector::Connector + Send>, GateError> {
    let mut last = String::new();
    for _ in 0..50 {
        let mut c = ctx.factory.make()?;
        match c.connect(SESSION, url) {
            Ok(()) => return Ok(c),
            // A kill that landed mid-connect is an engine error; anything else will not heal.
            Err(e) if e.kind != crate::error::ErrorKind::Engine => {
                return Err(GateError::instrument(format!(
                    "cannot reconnect the connector: {}: {}",
                    e.kind, e.message
                )));
            }
            Err(e) => last = format!("{}: {}", e.kind, e.message),
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Err(GateError::instrument(format!(
        "cannot reconnect the connector: {last}"
    )))
}

/// Each set of `queues` that still holds a job after a drain, with how many (an orphan, R4.14).
pub(super) fn left_in_sets(
    admin: &mut crate::engine::Admin,
    queues: &[String],
) -> Result<Vec<String>, GateError> {
    let mut left = Vec::new();
    for q in queues {
        for set in ["pending", "active", "delayed", "dead"] {
            let k = crate::protocol::grammar::key(q, set);
            let n: u64 = admin.query(&["ZCARD", &k])?;
            if n > 0 {
                left.push(format!("{k} holds {n}"));
            }
        }
    }
    Ok(left)
}
