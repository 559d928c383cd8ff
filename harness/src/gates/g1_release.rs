//! G1's connection accounting (R5.13): the connections a `connect` opened are closed when a
//! second `connect` of the same session replaces them, and when `disconnect` ends it. The
//! engine's `CLIENT LIST` (every primary of a cluster) is the witness: a connector that forgets
//! a session but keeps its socket passes every verb and grows without bound in production.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::connector::{Connector, Verbs};
use crate::engine::Admin;
use crate::faults::Matcher;
use crate::gates::{GateContext, GateError, GateOutcome};
use crate::observe::connector_clients;

const SESSION: &str = "r1";
const QUEUE: &str = "g1r";
/// How long the proxy holds one reply in [`after_a_timeout`]: past the shortest read timeout SPEC
/// P4.11 sets (3 s; G5's 2 s window rules out shorter ones), so such a connector gives up here,
/// and well within the harness's own 10 s.
const HOLD: Duration = Duration::from_millis(3500);

/// The least time a closed socket is given to leave the engine's client list; the wait is
/// stretched to ten times the slowest connect of the check, so a slow machine waits longer.
const SETTLE_MIN: Duration = Duration::from_secs(5);

/// One connection as the engine lists it: (node, client address).
type Client = (usize, String);

/// The connector's connections on `db` now (the harness's own excluded).
fn clients(
    admin: &mut Admin,
    db: u32,
    harness: &[BTreeSet<String>],
) -> Result<BTreeSet<Client>, GateError> {
    Ok(connector_clients(admin, db, harness)?
        .into_iter()
        .map(|c| (c.node, c.addr))
        .collect())
}

/// Polls until none of `gone` is listed, or `within` passed; what is still listed.
fn still_open(
    admin: &mut Admin,
    db: u32,
    harness: &[BTreeSet<String>],
    gone: &BTreeSet<Client>,
    within: Duration,
) -> Result<Vec<Client>, GateError> {
    let t0 = Instant::now();
    loop {
        let now = clients(admin, db, harness)?;
        let left: Vec<Client> = gone.intersection(&now).cloned().collect();
        if left.is_empty() || t0.elapsed() >= within {
            return Ok(left);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn show(left: &[Client]) -> String {
    let shown: Vec<String> = left
        .iter()
        .take(3)
        .map(|(node, addr)| format!("client {addr} on node {node}"))
        .collect();
    shown.join(", ")
}

/// Connect, connect again, a verb on each primary's queue, disconnect: each step's replaced
/// connections must leave the engine's list. `db` is G1's database; `admin` serves it.
pub fn check(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    admin: &mut Admin,
    db: u32,
    url: &crate::engine::Target,
    beside: &mut crate::gates::beside::Beside<'_, '_, '_>,
) -> Result<(), GateError> {
    (ctx.progress)("G1: the connections a session opened are closed when it is replaced or ends");
    let harness = admin.own_addrs_by_node()?;
    let mut c = ctx.factory.make()?;
    let before = clients(admin, db, &harness)?;
    let Some((first, settle)) = reconnect(out, &mut *c, admin, db, url, &harness, &before)? else {
        return Ok(());
    };
    if !disconnect(out, &mut *c, admin, db, &harness, (&before, &first), settle)? {
        return Ok(());
    }
    if ctx.engine.is_cluster() {
        // The proxy fronts one node; a cluster session's other node connections bypass it.
        return Ok(());
    }
    beside.here(out)
}

/// Connect, then connect the connected session again: the connections the first connect opened
/// must leave the engine's list (R5.13). Those connections and how long a closed one is given to
/// leave, or `None` when a connect failed (the outcome says so).
fn reconnect(
    out: &mut GateOutcome,
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    db: u32,
    url: &crate::engine::Target,
    harness: &[BTreeSet<String>],
    before: &BTreeSet<Client>,
) -> Result<Option<(BTreeSet<Client>, Duration)>, GateError> {
    let mut slowest = Duration::ZERO;
    let mut timed_connect = |c: &mut (dyn Connector + Send)| {
        let t0 = Instant::now();
        let r = c.connect(SESSION, url);
        slowest = slowest.max(t0.elapsed());
        r
    };
    if let Err(e) = timed_connect(&mut *c) {
        out.fail(format!(
            "connect of session {SESSION} failed ({})",
            e.evidence()
        ));
        return Ok(None);
    }
    let first: BTreeSet<Client> = clients(admin, db, harness)?
        .difference(before)
        .cloned()
        .collect();
    if let Err(e) = timed_connect(&mut *c) {
        out.fail(format!(
            "a second connect of the connected session {SESSION} failed ({})",
            e.evidence()
        ));
        return Ok(None);
    }
    let settle = SETTLE_MIN.max(slowest * 10);
    out.figure("release_settle_ms", settle.as_millis() as u64);
    let left = out.waiting(|| still_open(admin, db, harness, &first, settle))?;
    out.check(
        left.is_empty(),
        if left.is_empty() {
            "a connect of a connected session closed the connections the first connect had opened (R5.13)".to_string()
        } else {
            format!(
                "a connect of the connected session {SESSION} left {} of the {} connections the first connect opened open after {} ms: {} (R5.13: a connect of a connected session closes the old connections)",
                left.len(),
                first.len(),
                settle.as_millis(),
                show(&left)
            )
        },
    );
    Ok(Some((first, settle)))
}

/// A verb on each primary's queue, then disconnect: every connection the session opened beside
/// `known` (the connector's before it connected, and its first connect's) must leave the list
/// (R5.13). False when a call failed (the outcome says so).
fn disconnect(
    out: &mut GateOutcome,
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    db: u32,
    harness: &[BTreeSet<String>],
    known: (&BTreeSet<Client>, &BTreeSet<Client>),
    settle: Duration,
) -> Result<bool, GateError> {
    let (before, first) = known;
    // A queue on every primary, so a cluster session's node connections open too.
    for q in admin.one_name_per_primary(QUEUE) {
        if let Err(e) = c.enqueue(SESSION, &q, "r", 0) {
            out.fail(format!("enqueue on {q} failed ({})", e.evidence()));
            return Ok(false);
        }
    }
    let opened: BTreeSet<Client> = clients(admin, db, harness)?
        .difference(before)
        .filter(|k| !first.contains(k))
        .cloned()
        .collect();
    if let Err(e) = c.disconnect(SESSION) {
        out.fail(format!("disconnect of {SESSION} failed ({})", e.evidence()));
        return Ok(false);
    }
    let left = out.waiting(|| still_open(admin, db, harness, &opened, settle))?;
    out.figure("release_connections", opened.len() as u64);
    out.check(
        left.is_empty(),
        if left.is_empty() {
            "disconnect closed every connection the session had open (R5.13)".to_string()
        } else {
            format!(
                "disconnect of {SESSION} left {} of its {} connections open after {} ms: {} (R5.13: disconnect closes the session's connections)",
                left.len(),
                opened.len(),
                settle.as_millis(),
                show(&left)
            )
        },
    );
    Ok(true)
}

/// A call whose reply is held [`HOLD`] by the fault proxy, then `disconnect`: every connection
/// the session opened, the one a connector gave up on included, must leave the engine's list. A
/// connector whose read timeout fires abandons that connection; one that opens another and
/// leaves the first open leaks a socket per timeout in production (R5.13). A connector that
/// waits for the reply passes the same way. It mostly waits, so it runs beside G1's other parts
/// on database `db` (`gates/beside.rs`); a closed socket is given ten times its own connect to
/// leave, [`SETTLE_MIN`] at least.
pub fn after_a_timeout(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    db: u32,
) -> Result<(), GateError> {
    let url = ctx.engine.target(db);
    let admin = &mut ctx.engine.admin(db)?;
    let harness = admin.own_addrs_by_node()?;
    let before = clients(admin, db, &harness)?;
    let (proxy, through) = ctx.proxied(&url)?;
    let mut c = ctx.factory.make()?;
    let t0 = Instant::now();
    let ready = c.connect(SESSION, &through);
    let settle = SETTLE_MIN.max(t0.elapsed() * 10);
    let ready = ready.and_then(|()| c.enqueue(SESSION, QUEUE, "before", 0).map(drop));
    if let Err(e) = ready {
        out.fail(format!(
            "connect and enqueue of {SESSION} through a proxy failed ({})",
            e.evidence()
        ));
        return Ok(());
    }
    // Whatever the connector did, judged once the held reply has gone out.
    let enqueue = Matcher::evalsha(&ctx.bundle.script("enqueue").entry.sha1);
    let held = out
        .waiting(|| proxy.with_late_reply(enqueue, HOLD, || c.enqueue(SESSION, QUEUE, "held", 0)));
    out.figure(
        "release_held_call",
        match &held {
            Ok(id) => format!("ok {id}"),
            Err(e) => format!("error {}", e.kind),
        },
    );
    let opened: BTreeSet<Client> = clients(admin, db, &harness)?
        .difference(&before)
        .cloned()
        .collect();
    if let Err(e) = c.disconnect(SESSION) {
        out.fail(format!(
            "disconnect of {SESSION} after a held reply failed ({})",
            e.evidence()
        ));
        return Ok(());
    }
    let left = out.waiting(|| still_open(admin, db, &harness, &opened, settle))?;
    out.check(
        left.is_empty(),
        if left.is_empty() {
            "after a call whose reply was held 3.5 s, disconnect closed every connection the session had opened (R5.13)".to_string()
        } else {
            format!(
                "after a call whose reply was held 3.5 s ({}), disconnect of {SESSION} left {} of the {} connections it had opened open after {} ms: {} (R5.13: a connection given up on is closed, not abandoned)",
                match &held {
                    Ok(_) => "answered".to_string(),
                    Err(e) => format!("kind {}", e.kind),
                },
                left.len(),
                opened.len(),
                settle.as_millis(),
                show(&left)
            )
        },
    );
    Ok(())
}
