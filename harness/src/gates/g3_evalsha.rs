//! G3 evalsha-first (SPEC §4, §6): after `SCRIPT FLUSH` + `CONFIG RESETSTAT`, ≥ 100 calls of
//! each transition cost exactly one `SCRIPT LOAD` per script and no `EVAL`; a second flush in the
//! middle of the run costs exactly one more load per script; the caller sees no error.
//! Then only a miss costs a load: a pipelined batch with every script cached costs none, and
//! only `NOSCRIPT` is a miss (R4.9: match the prefix only): each transition on keys of the wrong
//! type gets a `WRONGTYPE` error reply, which costs exactly one `EVALSHA` and no load.
//! Matching the prefix only is judged from the other side too: from the second flush on, the
//! fault proxy in front of every node the session reaches rewrites the text after the code of
//! each `-NOSCRIPT` reply ([`REWRITTEN_NOSCRIPT`]), so a connector that knows a miss by one
//! engine's whole wording (Valkey's, or Redis's) sees an error where R4.9 asks for a load, on
//! every engine.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::connector::{Connector, Request, RetryOutcome, Verbs};
use crate::engine::Target;
use crate::engine::admin::Admin;
use crate::error::ConnectorError;
use crate::gates::{GateContext, GateDb, GateError, GateOutcome, GateProxy};
use crate::protocol::grammar::key;

/// Rounds of the workload; each calls every transition at least once.
const ROUNDS: usize = 100;
const QUEUE: &str = "g3";
/// The queue whose sets are strings, so that every transition gets a `WRONGTYPE` reply.
const WRONG_TYPE_QUEUE: &str = "g3-wrongtype";

/// What every `NOSCRIPT` reply says after its code from the second flush on
/// ([`crate::faults::Proxy::rewrite_error`]). The harness's own words, not the other engine
/// family's: Valkey sends `NOSCRIPT No matching script.` (`shared.noscripterr` in Valkey's
/// `src/server.c`), Redis 7.0 and 8.0 `NOSCRIPT No matching script. Please use EVAL.`, and
/// swapping one for the other would judge a connector differently on each engine and miss one
/// that searches the text for `No matching script`. One text that is neither, on every engine,
/// catches each; it keeps all SPEC lets a connector rely on (an error reply whose code is
/// `NOSCRIPT`), so a connector that matches the prefix only sees no difference.
pub const REWRITTEN_NOSCRIPT: &str = "the script is not in this engine's cache (the EchoMQ harness's words: a miss is known by its code)";
/// The code whose replies' text is rewritten.
const NOSCRIPT: &str = "NOSCRIPT";

/// The `script|load` count of each node.
fn loads_each(admin: &mut crate::engine::Admin) -> Result<Vec<u64>, GateError> {
    Ok(admin
        .commandstats_each()?
        .iter()
        .map(|s| s.get("script|load").copied().unwrap_or(0))
        .collect())
}

/// One round: 2 enqueues, 3 claims, complete, retry, promote, reap. Returns what went wrong.
fn round(
    c: &mut (dyn Connector + Send),
    q: &str,
    calls: &mut BTreeMap<&'static str, u64>,
) -> Result<Option<String>, ConnectorError> {
    let mut bump = |k: &'static str, n: u64| *calls.entry(k).or_default() += n;
    c.enqueue("s", q, "a", 0)?;
    c.enqueue("s", q, "b", 0)?;
    bump("enqueue", 2);
    let Some(j) = c.claim("s", q, 60_000)? else {
        return Ok(Some("claim found nothing to claim".into()));
    };
    bump("claim", 1);
    if !c.complete("s", q, &j.id, j.attempts)? {
        return Ok(Some("complete of a fresh claim returned false".into()));
    }
    bump("complete", 1);
    let Some(j) = c.claim("s", q, 0)? else {
        return Ok(Some("claim found nothing to claim".into()));
    };
    bump("claim", 1);
    if c.retry("s", q, &j.id, j.attempts, 0, 1_000_000)? != RetryOutcome::Delayed {
        return Ok(Some("retry of a fresh claim did not delay".into()));
    }
    bump("retry", 1);
    c.promote("s", q, 10)?;
    bump("promote", 1);
    if c.claim("s", q, 0)?.is_none() {
        return Ok(Some("claim found nothing to claim".into()));
    }
    bump("claim", 1);
    c.reap("s", q, 1_000_000, 10)?;
    bump("reap", 1);
    Ok(None)
}

/// The gate's check; an `Err` is the gate's ERROR ([`crate::gates::run_gate`] records it).
pub fn check(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { url, mut admin, .. } = ctx.database(crate::gates::GateId::G3)?;
    let (proxies, through) = proxies(ctx, &admin, &url)?;
    let Some(mut c) = ctx.connected("s", &through, out)? else {
        return Ok(());
    };
    // One queue per primary on a cluster, so every node serves every script (R8.2).
    let queues = admin.one_name_per_primary(QUEUE);
    admin.script_flush()?;
    admin.config_resetstat()?;
    let mut calls = BTreeMap::new();
    let t0 = Instant::now();
    let mut run = Run {
        ctx,
        admin: &mut admin,
        proxies: &proxies,
        queues: &queues,
    };
    let mid = run.rounds(&mut *c, &mut calls, out);
    let rewritten: u64 = proxies.iter().map(|p| p.end_rewrite()).sum();
    out.figure("noscript_rewritten", rewritten);
    let Some(mid) = mid? else {
        return Ok(());
    };
    out.figure("workload_ms", t0.elapsed().as_millis() as u64);
    let costs = Costs {
        nodes: queues.len() as u64,
        mid: &mid,
        rewritten,
    };
    judge_costs(ctx, &mut admin, &calls, &costs, out)?;
    cached_batch(&mut *c, &mut admin, out)?;
    engine_errors(&mut *c, &mut admin, out)
}

/// Every fault proxy the session's calls pass through, and the url through them: on a cluster
/// the proxy each primary announces (the url as it is: the seed is one of them); on one engine,
/// TLS or not, a proxy of the gate's own; behind Sentinel the primary's ([`GateContext::proxied`]).
fn proxies<'c>(
    ctx: &'c GateContext<'_>,
    admin: &Admin,
    url: &Target,
) -> Result<(Vec<GateProxy<'c>>, Target), GateError> {
    if ctx.engine.is_cluster() {
        let each = ctx
            .engine
            .primaries(admin)
            .into_iter()
            .map(|node| ctx.engine.proxy_of(node).map(GateProxy::Node))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok((each, url.clone()));
    }
    let (p, through) = ctx.proxied(url)?;
    Ok((vec![p], through))
}

/// The flush phase's workload and what it needs: the engine's counters, the proxies that
/// rewrite `NOSCRIPT` after the second flush, the queues (one per primary).
struct Run<'r, 'c, 'g> {
    ctx: &'r GateContext<'g>,
    admin: &'r mut Admin,
    proxies: &'r [GateProxy<'c>],
    queues: &'r [String],
}

impl Run<'_, '_, '_> {
    /// [`ROUNDS`] rounds over every queue, with a `SCRIPT FLUSH` halfway, after which every
    /// `NOSCRIPT` reply's text is rewritten ([`REWRITTEN_NOSCRIPT`]; the caller ends it). Returns
    /// each node's `script|load` count before that flush, or `None` when a round went wrong
    /// (recorded in `out`).
    fn rounds(
        &mut self,
        c: &mut (dyn Connector + Send),
        calls: &mut BTreeMap<&'static str, u64>,
        out: &mut GateOutcome,
    ) -> Result<Option<Vec<u64>>, GateError> {
        let mut loads_mid = None;
        for i in 0..ROUNDS {
            if i == ROUNDS / 2 {
                loads_mid = Some(loads_each(self.admin)?);
                for p in self.proxies {
                    p.rewrite_error(NOSCRIPT, REWRITTEN_NOSCRIPT);
                }
                self.admin.script_flush()?;
                (self.ctx.progress)(
                    "G3: SCRIPT FLUSH in the middle of the run; NOSCRIPT replies rewritten",
                );
            }
            let mut r = Ok(None);
            for q in self.queues {
                r = round(c, q, calls);
                if !matches!(r, Ok(None)) {
                    break;
                }
            }
            let failed = match r {
                Ok(None) => continue,
                Ok(Some(what)) => format!("round {i}: {what}"),
                Err(e) => {
                    let seen = format!("the caller saw an error in round {i} ({})", e.evidence());
                    out.figure("caller_error", e.message);
                    seen
                }
            };
            let during = match &loads_mid {
                Some(mid) => self.rewriting(mid)?,
                None => String::new(),
            };
            out.fail(format!("{failed}{during}"));
            return Ok(None);
        }
        Ok(Some(loads_mid.unwrap_or_default()))
    }

    /// What a failure after the second flush adds: the replies' text was not the engine's, how
    /// many were rewritten, and the loads the connector sent since. It cites no rule: a line
    /// that cites one concerns that rule alone (`rules::cited`), and a cluster double may fail
    /// here too.
    fn rewriting(&mut self, mid: &[u64]) -> Result<String, GateError> {
        let rewritten: u64 = self.proxies.iter().map(|p| p.rewritten()).sum();
        let before: u64 = mid.iter().sum();
        let loads = loads_each(self.admin)?
            .iter()
            .sum::<u64>()
            .saturating_sub(before);
        let replies = if rewritten == 1 { "reply" } else { "replies" };
        Ok(format!(
            " after the second SCRIPT FLUSH, from which the fault proxy rewrote the text after the \
             code of every NOSCRIPT reply (`-{NOSCRIPT} {REWRITTEN_NOSCRIPT}`; the code and the RESP \
             framing as the engine sent them): {rewritten} {replies} rewritten, and the connector \
             sent {loads} SCRIPT LOAD since that flush (a miss is known by the NOSCRIPT prefix alone)"
        ))
    }
}

/// What [`judge_costs`] holds the rounds to: `nodes` primaries, each node's loads before the
/// second flush, and the `NOSCRIPT` replies rewritten after it.
struct Costs<'m> {
    nodes: u64,
    mid: &'m [u64],
    rewritten: u64,
}

/// What the rounds cost on the engine: every transition called, one `SCRIPT LOAD` per script
/// per flush on each primary (the second flush's misses with their text rewritten), no `EVAL`,
/// an `EVALSHA` per transition.
fn judge_costs(
    ctx: &GateContext<'_>,
    admin: &mut Admin,
    calls: &BTreeMap<&'static str, u64>,
    costs: &Costs<'_>,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let (nodes, mid) = (costs.nodes, costs.mid);
    let scripts = ctx.bundle.scripts.len() as u64;
    let stats = admin.commandstats()?;
    let get = |k: &str| stats.get(k).copied().unwrap_or(0);
    let min = calls.values().copied().min().unwrap_or(0);
    out.check(
        calls.len() == 6 && min >= ROUNDS as u64,
        format!(
            "{ROUNDS} rounds, no caller-visible error: ≥{ROUNDS} calls of each of enqueue, claim, complete, retry, promote, reap"
        ),
    );
    let on = if nodes > 1 {
        format!(" on each of the {nodes} primaries")
    } else {
        String::new()
    };
    let shown = |v: &[u64]| match v {
        [one] => one.to_string(),
        many => format!("{many:?}"),
    };
    out.check(
        !mid.is_empty() && mid.iter().all(|n| *n == scripts),
        format!(
            "after the first SCRIPT FLUSH: script|load = {}{on} (one per script: {scripts})",
            shown(mid)
        ),
    );
    let each = loads_each(admin)?;
    let total: u64 = each.iter().sum();
    out.check(
        !each.is_empty() && each.iter().all(|n| *n == 2 * scripts),
        format!(
            "after the second SCRIPT FLUSH mid-run, with the text of its {} NOSCRIPT replies \
             rewritten (`-{NOSCRIPT} {REWRITTEN_NOSCRIPT}`): script|load = {} in all{on} (one per \
             script per flush: {})",
            costs.rewritten,
            shown(&each),
            2 * scripts,
        ),
    );
    let evals = get("eval") + get("eval_ro");
    out.check(evals == 0, format!("EVAL calls = {evals}"));
    let evalsha = get("evalsha") + get("evalsha_ro");
    let transitions: u64 = calls.values().sum();
    out.check(
        evalsha >= transitions,
        format!("every transition was an EVALSHA (evalsha calls ≥ the {transitions} transitions)"),
    );
    out.figure("evalsha_calls", evalsha);
    out.figure("script_load_calls", total);
    Ok(())
}

/// A pipelined `batch` while the scripts are cached: no miss, so no `SCRIPT LOAD` (a connector
/// that loads after every pipeline, miss or not, costs one per pipeline). How many enqueues land
/// is G5's to judge.
fn cached_batch(
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let (n, depth) = (1_000, 100);
    let loads = |admin: &mut Admin| -> Result<u64, GateError> {
        Ok(admin
            .commandstats()?
            .get("script|load")
            .copied()
            .unwrap_or(0))
    };
    let before = loads(admin)?;
    if let Err(e) = c.batch("s", QUEUE, n, depth, "b") {
        out.fail(format!(
            "a batch of {n} in pipelines of {depth} failed ({})",
            e.evidence()
        ));
        return Ok(());
    }
    let extra = loads(admin)?.saturating_sub(before);
    out.check(
        extra == 0,
        format!(
            "a batch of {n} in pipelines of {depth} with every script cached: script|load = {extra} (no miss, no load)"
        ),
    );
    Ok(())
}

/// One call of each transition on [`WRONG_TYPE_QUEUE`], whose pending, active and delayed sets
/// are strings: each script fails on its first use of them (`WRONGTYPE`), an error reply that is
/// not `NOSCRIPT`. Each must cost exactly one `EVALSHA` and no `SCRIPT LOAD` (the six scripts are
/// cached by now): a connector that takes any error for a miss loads and runs the call again.
/// The kind the caller sees is R5.4's, judged by G6's `error-engine-*` cases, not here.
fn engine_errors(
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let q = WRONG_TYPE_QUEUE;
    for set in ["pending", "active", "delayed"] {
        admin.query::<()>(&["SET", &key(q, set), "not a zset"])?;
    }
    let calls = every_transition_on(q);
    let counts = |admin: &mut Admin| -> Result<(u64, u64), GateError> {
        let stats = admin.commandstats()?;
        let get = |k: &str| stats.get(k).copied().unwrap_or(0);
        Ok((get("evalsha") + get("evalsha_ro"), get("script|load")))
    };
    let mut wrong = Vec::new();
    let mut replies = Vec::new();
    for req in &calls {
        let (evalsha0, load0) = counts(admin)?;
        let reply = c.call(req);
        let (evalsha1, load1) = counts(admin)?;
        let (evalsha, loads) = (
            evalsha1.saturating_sub(evalsha0),
            load1.saturating_sub(load0),
        );
        replies.push(format!(
            "{}: {}",
            req.cmd(),
            match &reply {
                Ok(r) => format!("ok {r:?}"),
                Err(e) => format!("error kind {}", e.kind),
            }
        ));
        if evalsha != 1 || loads != 0 {
            wrong.push(format!(
                "{} cost evalsha {evalsha}, script|load {loads}",
                req.cmd()
            ));
        }
    }
    out.figure("wrongtype_replies", replies.join("; "));
    out.none_of(
        &wrong,
        &format!(
            "an engine error reply is not a miss: each of the {} transitions on keys of the wrong \
             type (WRONGTYPE) cost exactly one EVALSHA and no SCRIPT LOAD",
            calls.len()
        ),
        "but",
    );
    Ok(())
}

/// One call of each transition on queue `q`, in the order evidence lists them.
fn every_transition_on(q: &str) -> [Request; 6] {
    let (session, queue, id) = (
        "s".to_string(),
        q.to_string(),
        "j0000000000000001".to_string(),
    );
    [
        Request::Enqueue {
            session: session.clone(),
            queue: queue.clone(),
            payload: "w".into(),
            delay_ms: 0,
        },
        Request::Claim {
            session: session.clone(),
            queue: queue.clone(),
            lease_ms: 0,
        },
        Request::Complete {
            session: session.clone(),
            queue: queue.clone(),
            id: id.clone(),
            attempts: 1,
        },
        Request::Retry {
            session: session.clone(),
            queue: queue.clone(),
            id,
            attempts: 1,
            backoff_ms: 0,
            max_attempts: 3,
        },
        Request::Promote {
            session: session.clone(),
            queue: queue.clone(),
            limit: 10,
        },
        Request::Reap {
            session,
            queue,
            max_attempts: 3,
            limit: 10,
        },
    ]
}
