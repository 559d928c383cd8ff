//! G1 on a TLS cluster (SPEC R10.3, R10.4): a node the session discovers from the slot map is
//! verified as the seed is. The front of a primary other than the seed presents a certificate
//! that must be refused, from before `connect` until a call routed to that node is answered: no
//! handshake with it may complete, and the call must fail with kind `engine`. A client that
//! gives its CA (or its name checks) to the seed only accepts it. Before that, while every front
//! presents the good certificate, a pipelined batch reaches every primary by the name the slot
//! map gives: a client that dials a node's address (`CLUSTER SHARDS`' `ip`) cannot verify it.

use crate::connector::{Connector, Request, Verbs};
use crate::engine::Target;
use crate::engine::topology::NodeId;
use crate::error::ErrorKind;
use crate::gates::{GateContext, GateError, GateOutcome};
use crate::tls::relay::Present;

/// A queue whose keys live on a primary other than the seed, and that primary.
fn queue_off_the_seed(ctx: &GateContext<'_>) -> Result<(String, NodeId), GateError> {
    let engine = ctx.engine;
    let seed = engine.seed();
    let admin = engine.admin(0)?;
    for i in 0..10_000 {
        let queue = format!("tls-node-{i}");
        let node = engine.primary_of(&admin, &queue)?;
        if node != seed {
            return Ok((queue, node));
        }
    }
    Err(GateError::instrument(
        "no queue name maps to a primary other than the seed",
    ))
}

/// Every primary reached by the name the slot map gives (R10.4): a batch over one queue per
/// primary, pipelined on the connector's connection to each node (R8.3), succeeds while every
/// front presents the good certificate. No certificate names an address, so a client that
/// dials the nodes' addresses fails its handshakes there.
pub(super) fn reached_by_name(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    url: &Target,
) -> Result<(), GateError> {
    let queues = ctx.engine.admin(0)?.one_name_per_primary("tls-name");
    let mut c = ctx.factory.make()?;
    let n = 2 * queues.len() as i64;
    let got = c
        .connect("tls-name", url)
        .and_then(|()| c.batch_over("tls-name", &queues, n, 2, "by-name"));
    let _ = c.call(&Request::Disconnect {
        session: "tls-name".into(),
    });
    match got {
        Ok(_) => out.pass(
            "a batch over a queue of every primary succeeded with every node verified: each was dialled by the name the slot map gives (R10.4)",
        ),
        Err(e) => out.fail(format!(
            "a batch over a queue of every primary ({queues:?}) failed while every node presented a good certificate for the name the slot map gives, kind {}: {}; a node is dialled by that name (CLUSTER SHARDS' endpoint), never its address (R10.4)",
            e.kind, e.message
        )),
    }
    Ok(())
}

/// One session while a discovered node's front presents `lie`.
pub(super) fn refused_on_discovered(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    url: &Target,
    lie: Present,
    rule: &str,
) -> Result<(), GateError> {
    let (queue, node) = queue_off_the_seed(ctx)?;
    let front = ctx
        .engine
        .proxy_of(node)?
        .front()
        .ok_or_else(|| GateError::instrument(format!("no TLS front at {node}")))?;
    let mut c = ctx.factory.make()?;
    let _ = front.take_presented();
    let since = front.mark();
    front.present(lie);
    let t0 = std::time::Instant::now();
    let connected = c.connect("tls-node", url);
    let call = connected.as_ref().ok().map(|()| {
        c.call(&Request::PendingSize {
            session: "tls-node".into(),
            queue: queue.clone(),
        })
    });
    let took = t0.elapsed();
    front.present(Present::Good);
    let seen = front.settled(since, took).map_err(GateError::instrument)?;
    let what = lie.describe();
    let node = format!(
        "node {} (discovered from the slot map, not the seed)",
        ctx.engine.announced_port(node)
    );
    let accepted = seen.iter().filter(|p| p.completed).count();
    match (connected, call) {
        (Err(e), _) if e.kind != ErrorKind::Engine => out.fail(format!(
            "connect failed with kind {} while {node} presented {what}; only kind engine is a refusal (R5.4): {}",
            e.kind, e.message
        )),
        (Ok(()), Some(Ok(reply))) => out.fail(format!(
            "pending_size on queue {queue:?}, whose slot {node} serves, answered {} while that node presented {what}: it must be refused ({rule}, R10.2: every node a session reaches is verified)",
            reply.to_json()
        )),
        (Ok(()), Some(Err(e))) if e.kind != ErrorKind::Engine => out.fail(format!(
            "pending_size on queue {queue:?} failed with kind {}, not engine, while {node} presented {what} (R5.4): {}",
            e.kind, e.message
        )),
        _ if accepted > 0 => out.fail(format!(
            "{accepted} of {} TLS handshakes with {node} completed while it presented {what}: the client accepted it ({rule})",
            seen.len()
        )),
        _ if seen.is_empty() => out.fail(format!(
            "the call routed to {node} failed, but no TLS handshake reached that node while it presented {what}: the refusal must come from verifying it ({rule})"
        )),
        _ => out.pass(format!(
            "{what} refused on a node discovered from the slot map ({rule}, R10.2), the call kind engine"
        )),
    }
    let _ = c.call(&Request::Disconnect {
        session: "tls-node".into(),
    });
    Ok(())
}
