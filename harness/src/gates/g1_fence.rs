//! G1 fence (SPEC §3, §6): a connect on a fresh database installs the fence (`HSETNX` inside
//! `MULTI`/`EXEC`); every connect reads it before its first script, as `MONITOR` sees it; a fence
//! of another protocol is refused with kind `fence`, naming both versions, and no script is sent;
//! the connections a session opened are closed when it is replaced or ends ([`super::g1_release`]).

use std::collections::BTreeMap;

use crate::connector::{Connector, Verbs};
use crate::error::{ConnectorError, ErrorKind};
use crate::gates::{GateContext, GateDb, GateError, GateOutcome};
use crate::observe::{Observed, Watch, is_script_cmd, keys_of, names_emq_key, stable};
use crate::protocol::grammar::FENCE_KEY;

const QUEUE: &str = "g1";

fn is_fence_read(args: &[String]) -> bool {
    let cmd = args[0].to_ascii_uppercase();
    (cmd == "HGETALL" || cmd == "HMGET") && args.get(1).map(String::as_str) == Some(FENCE_KEY)
}

/// Per connector connection that did anything with EchoMQ: its first such command, described.
fn first_actions(obs: &Observed, bundle: &crate::protocol::bundle::Bundle) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for cmds in obs.commands.values() {
        // The reads of a read verb may come first (P3.1): the first of the rest is judged.
        if let Some(first) = cmds.iter().find(|a| {
            (is_script_cmd(a) || names_emq_key(a)) && !crate::observe::reconnect::is_read_verb(a)
        }) {
            out.push((
                crate::observe::reconnect::describe(first, bundle),
                is_fence_read(first),
            ));
        }
    }
    out
}

/// Checks the fence install seen on the engine: `HSETNX` of the three fields inside `MULTI`/`EXEC`.
fn judge_install(obs: &Observed, out: &mut GateOutcome) {
    let mut fields = Vec::new();
    let mut outside = 0;
    let mut other_writes = Vec::new();
    for cmds in obs.commands.values() {
        let mut in_multi = false;
        for a in cmds {
            let cmd = a[0].to_ascii_uppercase();
            match cmd.as_str() {
                "MULTI" => in_multi = true,
                "EXEC" | "DISCARD" => in_multi = false,
                _ => {}
            }
            let on_fence = a.get(1).map(String::as_str) == Some(FENCE_KEY);
            if cmd == "HSETNX" && on_fence {
                fields.push(a.get(2).cloned().unwrap_or_default());
                if !in_multi {
                    outside += 1;
                }
            } else if on_fence && !is_fence_read(a) {
                other_writes.push(cmd);
            }
        }
    }
    fields.sort();
    fields.dedup();
    out.check(
        fields == ["bundle", "digest", "protocol"] && outside == 0,
        format!(
            "the install was HSETNX of {fields:?} on {FENCE_KEY}, {} inside MULTI/EXEC",
            if outside == 0 { "all" } else { "not all" }
        ),
    );
    other_writes.sort();
    other_writes.dedup();
    if other_writes.is_empty() {
        out.pass(format!("no other command touched {FENCE_KEY}"));
    } else {
        out.fail(format!(
            "other commands touched {FENCE_KEY}: {other_writes:?}"
        ));
    }
}

/// The gate's check; an `Err` is the gate's ERROR ([`crate::gates::run_gate`] records it).
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    // The held reply of R5.13 waits 3.5 s: it is left to the run, to go on beside later gates
    // on a database of its own (`gates/sequence.rs`).
    crate::gates::beside::with_part(
        ctx,
        crate::gates::GateId::G1,
        out,
        super::g1_release::after_a_timeout,
        crate::gates::beside::Reach::LaterGates,
        |out, beside| parts(ctx, out, beside),
    )
}

/// G1's parts in order; the held reply ([`super::g1_release::after_a_timeout`]) stands where
/// `beside` is reached.
fn parts(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    beside: &mut crate::gates::beside::Beside<'_, '_, '_>,
) -> Result<(), GateError> {
    let GateDb { db, url, mut admin } = ctx.database(crate::gates::GateId::G1)?;
    // Two connectors side by side below: their start-ups overlap (issue #24).
    ctx.factory
        .warm(2, crate::connector::starts::StartReason::Concurrent);
    if !admin.hgetall(FENCE_KEY)?.is_empty() {
        return Err(GateError::Dirty {
            db,
            what: "a fence",
        });
    }

    // 1. Fresh database: the first connect installs; every connect reads first.
    (ctx.progress)("G1: connects on a fresh database under MONITOR");
    let watch = Watch::start(&mut admin, db, &[])?;
    let mut a = ctx.factory.make()?;
    if let Err(e) = a.connect("s1", &url) {
        let _ = watch.stop();
        out.fail(format!(
            "the first connect on a fresh database failed ({})",
            e.evidence()
        ));
        out.figure("first_connect_error", e.message);
        return Ok(());
    }
    judge_fence(ctx, &admin.hgetall(FENCE_KEY)?, out);
    let steps = connect_workload(ctx, &mut *a, &url);
    let obs = watch.stop()?;
    if let Err(e) = steps {
        out.fail(format!(
            "a verb of the connect workload failed ({})",
            e.evidence()
        ));
        out.figure("workload_error", e.message);
    }
    if obs.all.is_empty() {
        return Err(GateError::Unobserved("saw nothing"));
    }
    judge_install(&obs, out);
    if ctx.engine.is_cluster() {
        judge_order_on_cluster(&obs, out);
        cluster_urls(ctx, out, &url)?;
        super::g1_release::check(ctx, out, &mut admin, db, &url, beside)?;
        super::g1_tls::check(ctx, out, &url)?;
        super::g1_stop::check(ctx, out, &url)?;
        return refusal(ctx, out, &mut admin, db, &url);
    }
    judge_first_actions(&obs, ctx.bundle, out);
    super::g1_release::check(ctx, out, &mut admin, db, &url, beside)?;
    super::g1_tls::check(ctx, out, &url)?;
    super::g1_sentinel::check(ctx, out, db)?;
    super::g1_stop::check(ctx, out, &url)?;

    refusal(ctx, out, &mut admin, db, &url)
}

/// The fence after the first connect on a fresh database: the bundle's protocol, name, digest.
fn judge_fence(ctx: &GateContext<'_>, fence: &BTreeMap<String, String>, out: &mut GateOutcome) {
    let m = &ctx.bundle.manifest;
    let want: BTreeMap<String, String> = [
        ("protocol", m.protocol.to_string()),
        ("bundle", m.bundle.clone()),
        ("digest", m.digest.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if *fence == want {
        out.pass(format!(
            "the first connect on a fresh database installed the fence: protocol={} bundle={} digest={}",
            m.protocol, m.bundle, m.digest
        ));
    } else {
        out.fail(format!(
            "after the first connect on a fresh database {FENCE_KEY} is {fence:?}, not this \
             bundle's protocol, name and digest {}",
            crate::gates::rules::cited::cite(crate::gates::rules::RuleId::new(3, 2))
        ));
    }
}

/// The connects after the first: two more sessions, a reconnect, a second instance.
fn connect_workload(
    ctx: &GateContext<'_>,
    a: &mut (dyn Connector + Send),
    url: &crate::engine::Target,
) -> Result<(), ConnectorError> {
    a.enqueue("s1", QUEUE, "one", 0)?;
    a.connect("s2", url)?;
    a.enqueue("s2", QUEUE, "two", 0)?;
    a.connect("s3", url)?;
    a.claim("s3", QUEUE, 60_000)?;
    a.disconnect("s1")?;
    a.connect("s1", url)?;
    a.enqueue("s1", QUEUE, "three", 0)?;
    let mut b = ctx
        .factory
        .make()
        .map_err(|e| ConnectorError::internal(e.to_string()))?;
    b.connect("t1", url)?;
    b.claim("t1", QUEUE, 60_000)?;
    b.disconnect("t1")?;
    Ok(())
}

/// On a single engine: every connection's first EchoMQ command, a read verb's reads aside
/// (P3.1), was the fence read.
fn judge_first_actions(
    obs: &Observed,
    bundle: &crate::protocol::bundle::Bundle,
    out: &mut GateOutcome,
) {
    let firsts = first_actions(obs, bundle);
    let good = firsts.iter().filter(|(_, ok)| *ok).count();
    let mut bad: Vec<String> = firsts
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(w, _)| w.clone())
        .collect();
    bad.sort();
    bad.dedup();
    out.figure("connector_connections", firsts.len());
    out.none_of(&bad, "5 connects (3 sessions, a reconnect, a second instance): every connection read the fence before its first script or write of an EchoMQ key (R3.1; a read verb's reads may come first, P3.1)", "connections began with");
    out.check(
        good >= 5,
        format!(
            "fence reads before the first script on {} connections (5 connects made)",
            if good >= 5 { "all" } else { "too few" }
        ),
    );
}

/// R8.5 on a cluster: the engine, not the client, says which databases there are. A seed url
/// naming database 3 (which the url's user may not use: `NOPERM`) and one naming database 16
/// (past `cluster-databases`: out of range) both fail `connect` with kind `engine`; a client
/// that refuses them itself (kind `invalid`, as SPEC once asked) or connects anyway fails.
fn cluster_urls(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    url: &crate::engine::Target,
) -> Result<(), GateError> {
    let run_db = crate::engine::cluster::DB;
    let seed = match url.engine_url() {
        Ok(u) if u.db == Some(run_db) => u,
        _ => {
            return Err(GateError::instrument(format!(
                "the cluster url {} does not end in /{run_db}",
                url.url
            )));
        }
    };
    let mut c = ctx.factory.make()?;
    for (db, why) in [
        (3, "not granted to its user"),
        (
            crate::engine::cluster::DATABASES,
            "past the engine's cluster-databases",
        ),
    ] {
        let other = url.at(seed.with_db(Some(db)).to_string());
        let what = format!("on a cluster, a connect whose url names database {db} ({why})");
        let connected = c.connect(&format!("db{db}"), &other);
        // The engine logs the refusal of database 3 it was asked for: not the connector's fault.
        let object = db.to_string();
        crate::gates::acl::judge_acl_except(ctx, out, |e| {
            e.reason == "database" && e.object == object
        });
        match connected {
            Err(e) if e.kind == crate::error::ErrorKind::Engine => out.pass(format!(
                "{what} fails with kind engine, the engine's refusal (R8.5)"
            )),
            Err(e) => out.fail(format!(
                "{what} must fail with kind engine, the engine's refusal of the SELECT (R8.5), got kind {}: {}",
                e.kind, e.message
            )),
            Ok(()) => out.fail(format!(
                "{what} succeeded; the engine refuses that database, so it must fail with kind engine (R8.5)"
            )),
        }
    }
    Ok(())
}

/// On a cluster a session is a connection per node and the fence lives on one of them, so
/// "first" is judged in engine time across every node's `MONITOR`: at least one fence read per
/// connect, and no connection's first script before the connector's first fence read.
fn judge_order_on_cluster(obs: &Observed, out: &mut GateOutcome) {
    let mut reads = 0;
    let mut began: std::collections::BTreeSet<&str> = Default::default();
    let mut early = Vec::new();
    for l in &obs.all {
        if !obs.commands.contains_key(&l.addr) {
            continue;
        }
        if is_fence_read(&l.args) {
            reads += 1;
        }
        if (is_script_cmd(&l.args) || names_emq_key(&l.args))
            && began.insert(l.addr.as_str())
            && reads == 0
            && !is_fence_read(&l.args)
        {
            early.push(l.args[0].to_uppercase());
        }
    }
    out.figure("connector_connections", obs.commands.len());
    out.none_of(
        &early,
        "on a cluster, in engine time over every node: no connection sent a script or touched an EchoMQ key before the connector's first fence read",
        "sent first",
    );
    out.check(
        reads >= 5,
        format!(
            "on a cluster: {} fence reads for 5 connects (3 sessions, a reconnect, a second instance)",
            if reads >= 5 { "enough" } else { "too few" }
        ),
    );
}

/// Part 2: a fence of another protocol is refused, kind fence, both versions named, nothing sent.
fn refusal(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    admin: &mut crate::engine::Admin,
    db: u32,
    url: &crate::engine::Target,
) -> Result<(), GateError> {
    let m = &ctx.bundle.manifest;
    (ctx.progress)("G1: a fence of protocol 2");
    let theirs = (m.protocol + 1).to_string();
    let their_bundle = format!("{theirs}.0.0");
    admin.hset(
        FENCE_KEY,
        &[("protocol", &theirs), ("bundle", &their_bundle)],
    )?;
    let watch = Watch::start(admin, db, &[])?;
    let mut c = ctx.factory.make()?;
    let refused = c.connect("x", url);
    let after = c.enqueue("x", QUEUE, "after", 0);
    let obs = watch.stop()?;
    match refused {
        Ok(()) => out.fail(format!(
            "a connect against a protocol-{theirs} fence succeeded"
        )),
        Err(e) => {
            out.check(
                e.kind == ErrorKind::Fence,
                format!(
                    "a connect against a protocol-{theirs} fence is refused with kind {}",
                    e.kind
                ),
            );
            let tokens: Vec<&str> = e
                .message
                .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '.'))
                .map(|t| t.trim_end_matches('.'))
                .collect();
            let names = |v: &str, b: &str| tokens.iter().any(|t| *t == v || *t == b);
            out.check(
                names(&theirs, &their_bundle) && names(&m.protocol.to_string(), &m.bundle),
                format!(
                    "the refusal names both versions ({theirs} and {})",
                    m.protocol
                ),
            );
            out.figure("fence_error", e.message);
        }
    }
    match after {
        Ok(_) => out.fail("a verb on the refused session succeeded"),
        Err(e) => out.pass(format!(
            "a verb on the refused session fails ({})",
            e.evidence()
        )),
    }
    let mut sent: Vec<String> = obs
        .every_command()
        .filter(|(_, a)| is_script_cmd(a) || (names_emq_key(a) && !is_fence_read(a)))
        .map(|(_, a)| {
            let k = keys_of(a)
                .and_then(|k| k.first().map(|k| stable(k)))
                .unwrap_or_default();
            format!("{} {k}", a[0].to_uppercase()).trim().to_string()
        })
        .collect();
    sent.sort();
    sent.dedup();
    out.none_of(&sent, "after the refusal the connector sent no script (EVALSHA/EVAL/SCRIPT LOAD) and nothing else on an EchoMQ key", "sent");
    let read = obs.every_command().any(|(_, a)| is_fence_read(a));
    out.check(read, "the refused connect read the fence");
    let now = admin.hgetall(FENCE_KEY)?;
    out.check(
        now.get("protocol") == Some(&theirs) && now.get("bundle") == Some(&their_bundle),
        format!("the protocol-{theirs} fence was left as it was"),
    );
    Ok(())
}
