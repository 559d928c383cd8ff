//! G1 on a Sentinel deployment (SPEC R11.1, R11.2): `connect` finds the primary with the first
//! Sentinel in trouble, one trouble at a time, on a fresh connector each: refusing every
//! connection, silent (its proxy reads and never answers), and stale (its proxy names a replica
//! as the primary). Each `connect` must succeed within R5.8's timeout and its session enqueue on
//! the primary; on the stale Sentinel's replica nothing but a connection's set-up and `ROLE` may
//! arrive from the connector's user. Last, every Sentinel names a node that takes the connection
//! (and its TLS) and answers nothing, as a stopped primary does until the Sentinels fail it over:
//! `connect` must fail with kind `engine` within R5.8's timeout (each named node, like each
//! Sentinel, gets a share of it).

use std::time::{Duration, Instant};

use crate::connector::Verbs;
use crate::engine::EngineKind;
use crate::engine::topology::{NodeId, SentinelId};
use crate::faults::Proxy;
use crate::faults::resp::Command;
use crate::gates::rules::{RuleId, cited::cite};
use crate::gates::{GateContext, GateError, GateOutcome};

const QUEUE: &str = "g1-sentinel";

/// What the first Sentinel does while one `connect` runs.
#[derive(Debug, Clone, Copy)]
enum Trouble {
    Refusing,
    Silent,
    Stale,
}

impl Trouble {
    fn words(self) -> &'static str {
        match self {
            Self::Refusing => "refusing every connection",
            Self::Silent => "silent (it reads every command and answers none)",
            Self::Stale => "stale (it names a replica as the primary)",
        }
    }
}

/// The commands a connection to a node that is not the primary may carry before the connector
/// closes it (R11.2): its set-up (R4.19) and `ROLE`.
const BEFORE_ROLE: [&str; 6] = ["AUTH", "HELLO", "SELECT", "PING", "CLIENT", "ROLE"];

/// The `connect`s of R11.1 and R11.2; nothing on any other engine.
pub(super) fn check(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    db: u32,
) -> Result<(), GateError> {
    if ctx.engine.kind != EngineKind::Sentinel {
        return Ok(());
    }
    let first = ctx.engine.sentinel_proxy(SentinelId::new(0))?;
    let primary = ctx.engine.seed();
    let replica = ctx
        .engine
        .nodes()
        .into_iter()
        .find(|n| *n != primary)
        .ok_or_else(|| GateError::instrument("a Sentinel engine with no replica"))?;
    for trouble in [Trouble::Refusing, Trouble::Silent, Trouble::Stale] {
        (ctx.progress)(&format!(
            "G1: connect with the first Sentinel {}",
            trouble.words()
        ));
        let replica_proxy = ctx.engine.proxy_of(replica)?;
        arm(ctx, first, replica_proxy, replica, trouble);
        let t0 = Instant::now();
        let done = connect_and_enqueue(ctx, db, trouble);
        let took = t0.elapsed();
        disarm(first, trouble);
        let journal = replica_proxy.take_journal();
        judge(out, trouble, done, took);
        if matches!(trouble, Trouble::Stale) {
            judge_replica(out, replica, &journal);
        }
    }
    // Last: a connector that times out here is killed, and this gate's later ones with it.
    named_silent(ctx, out, db)
}

/// What a lying Sentinel names: a node of the engine, or a proxy of the gate's own (no node).
enum Named<'a> {
    Node(NodeId),
    Proxy(&'a Proxy),
}

/// `SENTINEL get-master-addr-by-name` (and its newer name) answered with the address of `what`
/// as the engine announces its nodes, as a Sentinel whose proxy lies answers it.
fn named(e: &crate::engine::Engine, what: Named<'_>) -> String {
    let host = crate::engine::sentinel::announced_host(e.tls().is_some());
    let port = match what {
        Named::Node(id) => e.announced_port(id),
        Named::Proxy(p) => p.port(),
    }
    .to_string();
    format!(
        "*2\r\n${}\r\n{host}\r\n${}\r\n{port}\r\n",
        host.len(),
        port.len()
    )
}

const ADDR_BY_NAME: [&str; 2] = ["get-master-addr-by-name", "get-primary-addr-by-name"];

/// R11.1: every Sentinel names a silent node (a muted fault proxy of the gate's own, with a TLS
/// front on a TLS engine); `connect` must fail with kind `engine` within R5.8's timeout.
fn named_silent(ctx: &GateContext<'_>, out: &mut GateOutcome, db: u32) -> Result<(), GateError> {
    let e = ctx.engine;
    let upstream = format!("127.0.0.1:{}", e.port_of(e.seed()));
    let silent = match e.tls() {
        Some(run) => Proxy::start_tls(&upstream, run),
        None => Proxy::start(&upstream),
    }
    .map_err(|err| {
        GateError::instrument(format!("the silent node's proxy did not start: {err}"))
    })?;
    silent.mute(true);
    let lie = named(e, Named::Proxy(&silent));
    let sentinels = e
        .sentinels()
        .into_iter()
        .map(|id| e.sentinel_proxy(id))
        .collect::<Result<Vec<_>, _>>()?;
    (ctx.progress)(&format!(
        "G1: connect with every Sentinel naming a silent node (port {})",
        silent.port()
    ));
    for s in &sentinels {
        for sub in ADDR_BY_NAME {
            s.answer("SENTINEL", sub, lie.as_bytes());
        }
    }
    let t0 = Instant::now();
    let done = connect_only(ctx, db);
    let took = t0.elapsed();
    for s in &sentinels {
        s.end_answers();
    }
    judge_named_silent(out, done, took);
    Ok(())
}

/// A fresh connector's `connect`, and its `disconnect` when it succeeded.
fn connect_only(ctx: &GateContext<'_>, db: u32) -> Result<(), crate::error::ConnectorError> {
    let mut c = ctx
        .factory
        .make()
        .map_err(|e| crate::error::ConnectorError::internal(e.to_string()))?;
    c.connect("sentinel-named-silent", ctx.engine.target(db))?;
    let _ = c.disconnect("sentinel-named-silent");
    Ok(())
}

/// R11.1: no Sentinel named a primary that passes R11.2, so `connect` fails with kind `engine`,
/// within R5.8's timeout.
fn judge_named_silent(
    out: &mut GateOutcome,
    done: Result<(), crate::error::ConnectorError>,
    took: Duration,
) {
    let bound = crate::connector::child::DEFAULT_TIMEOUT;
    let rule = cite(RuleId::new(11, 1));
    // No port here: the evidence is compared across runs (the progress line names it).
    let what = "with every Sentinel naming a silent node";
    match done {
        Ok(()) => out.fail(format!(
            "{rule}: {what}, connect succeeded: no Sentinel named a primary that answers ROLE"
        )),
        Err(e) if e.kind != crate::error::ErrorKind::Engine => out.fail(format!(
            "{rule}: {what}, connect must fail with kind engine within R5.8's {} s; it ended after {} ms with {}",
            bound.as_secs(),
            took.as_millis(),
            e.evidence()
        )),
        Err(_) if took > bound => out.fail(format!(
            "{rule}: {what}, connect failed with kind engine after {} ms, past R5.8's {} s",
            took.as_millis(),
            bound.as_secs()
        )),
        Err(_) => out.pass(format!(
            "R11.1: {what}, connect failed with kind engine within R5.8's timeout"
        )),
    }
    out.figure("sentinel_connect_ms_named_silent", took.as_millis() as u64);
}

fn arm(ctx: &GateContext<'_>, first: &Proxy, replica_proxy: &Proxy, replica: NodeId, t: Trouble) {
    match t {
        Trouble::Refusing => first.refuse(true),
        Trouble::Silent => first.mute(true),
        Trouble::Stale => {
            let lie = named(ctx.engine, Named::Node(replica));
            replica_proxy.journal();
            for sub in ADDR_BY_NAME {
                first.answer("SENTINEL", sub, lie.as_bytes());
            }
        }
    }
}

fn disarm(first: &Proxy, t: Trouble) {
    match t {
        Trouble::Refusing => first.refuse(false),
        Trouble::Silent => first.mute(false),
        Trouble::Stale => first.end_answers(),
    }
}

/// A fresh connector's `connect` and one `enqueue` (on a replica it would be refused).
fn connect_and_enqueue(
    ctx: &GateContext<'_>,
    db: u32,
    t: Trouble,
) -> Result<(), crate::error::ConnectorError> {
    let mut c = ctx
        .factory
        .make()
        .map_err(|e| crate::error::ConnectorError::internal(e.to_string()))?;
    let session = format!("sentinel-{t:?}").to_ascii_lowercase();
    c.connect(&session, ctx.engine.target(db))?;
    let r = c.enqueue(&session, QUEUE, "found", 0).map(|_| ());
    let _ = c.disconnect(&session);
    r
}

/// R11.1: the `connect` and its `enqueue` succeeded, within R5.8's timeout.
fn judge(
    out: &mut GateOutcome,
    t: Trouble,
    done: Result<(), crate::error::ConnectorError>,
    took: Duration,
) {
    let bound = crate::connector::child::DEFAULT_TIMEOUT;
    match done {
        Err(e) => out.fail(format!(
            "{}: with the first Sentinel {}, connect and an enqueue failed ({})",
            cite(RuleId::new(11, 1)),
            t.words(),
            e.evidence()
        )),
        Ok(()) if took > bound => out.fail(format!(
            "{}: with the first Sentinel {}, connect and an enqueue took {} ms, past R5.8's {} s",
            cite(RuleId::new(11, 1)),
            t.words(),
            took.as_millis(),
            bound.as_secs()
        )),
        Ok(()) => out.pass(format!(
            "R11.1: connect found the primary with the first Sentinel {}",
            t.words()
        )),
    }
    out.figure(
        &format!("sentinel_connect_ms_{t:?}").to_ascii_lowercase(),
        took.as_millis() as u64,
    );
}

/// R11.2: what the connector's user sent to the replica the stale Sentinel named.
fn judge_replica(
    out: &mut GateOutcome,
    replica: NodeId,
    journal: &std::collections::BTreeMap<u64, Vec<Command>>,
) {
    let mut reached = 0;
    for cmds in journal.values().filter(|c| is_connector(c)) {
        reached += 1;
        let past: Vec<String> = cmds
            .iter()
            .filter(|c| !BEFORE_ROLE.contains(&c.name().as_str()))
            .map(|c| c.name())
            .collect();
        let role = cmds.iter().any(|c| c.name() == "ROLE");
        if !past.is_empty() || !role {
            let sent: Vec<String> = cmds.iter().map(|c| c.name()).collect();
            out.fail(format!(
                "{}: a connection to {replica} (a replica the stale Sentinel named) carried {} \
                 (first commands: {})",
                cite(RuleId::new(11, 2)),
                if role {
                    format!("{} after ROLE", past.join(", "))
                } else {
                    format!("{} with no ROLE first", past.join(", "))
                },
                sent.iter().take(8).cloned().collect::<Vec<_>>().join(" ")
            ));
            return;
        }
    }
    out.figure("sentinel_replica_connections", reached as u64);
    out.pass(format!(
        "R11.2: every connection the connector opened to {replica}, the replica a stale Sentinel \
         named, asked ROLE and carried nothing more"
    ));
}

/// A connection that authenticated as the connector's user (`AUTH emq …`, `HELLO 3 AUTH emq …`).
fn is_connector(cmds: &[Command]) -> bool {
    let user = crate::engine::acl::CONNECTOR_USER.as_bytes();
    cmds.iter().any(|c| match c.name().as_str() {
        "AUTH" => c.args.len() == 3 && c.args[1] == user,
        "HELLO" => c
            .args
            .windows(2)
            .any(|w| w[0].eq_ignore_ascii_case(b"AUTH") && w[1] == user),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Command {
        Command {
            raw: Vec::new(),
            args: args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        }
    }

    #[test]
    fn a_connection_is_the_connectors_by_the_user_it_authenticates_as() {
        let user = crate::engine::acl::CONNECTOR_USER;
        assert!(is_connector(&[cmd(&["AUTH", user, "pw"])]));
        assert!(is_connector(&[cmd(&["HELLO", "3", "AUTH", user, "pw"])]));
        assert!(!is_connector(&[cmd(&["AUTH", "admin", "pw"])]));
        assert!(!is_connector(&[cmd(&["AUTH", "pw"])]));
    }

    #[test]
    fn every_sentinel_naming_a_silent_node_must_fail_connect_with_kind_engine_in_time() {
        use crate::error::{ConnectorError, ErrorKind};
        let verdict = |done, ms| {
            let mut out = GateOutcome::new(crate::gates::GateId::G1, "fence");
            judge_named_silent(&mut out, done, Duration::from_millis(ms));
            out.verdict
        };
        let engine = || {
            Err(ConnectorError::new(
                ErrorKind::Engine,
                "no Sentinel named a primary",
            ))
        };
        assert_eq!(verdict(engine(), 6_000), crate::gates::Verdict::Pass);
        assert_eq!(verdict(engine(), 12_000), crate::gates::Verdict::Fail);
        assert_eq!(verdict(Ok(()), 100), crate::gates::Verdict::Fail);
        let timeout = ConnectorError::internal("no answer to connect (seq 2) within 10 s");
        assert_eq!(verdict(Err(timeout), 10_000), crate::gates::Verdict::Fail);
    }

    #[test]
    fn a_replica_may_see_set_up_and_role_and_nothing_more() {
        let user = crate::engine::acl::CONNECTOR_USER;
        let mut out = GateOutcome::new(crate::gates::GateId::G1, "fence");
        let ok = std::collections::BTreeMap::from([(
            1,
            vec![
                cmd(&["AUTH", user, "pw"]),
                cmd(&["SELECT", "3"]),
                cmd(&["ROLE"]),
            ],
        )]);
        judge_replica(&mut out, NodeId::new(1), &ok);
        assert_eq!(out.verdict, crate::gates::Verdict::Pass);
        for bad in [
            vec![
                cmd(&["AUTH", user, "pw"]),
                cmd(&["ROLE"]),
                cmd(&["HGETALL", "emq:fence"]),
            ],
            vec![cmd(&["AUTH", user, "pw"]), cmd(&["HGETALL", "emq:fence"])],
        ] {
            let mut out = GateOutcome::new(crate::gates::GateId::G1, "fence");
            judge_replica(
                &mut out,
                NodeId::new(1),
                &std::collections::BTreeMap::from([(1, bad)]),
            );
            assert_eq!(out.verdict, crate::gates::Verdict::Fail);
        }
    }
}
