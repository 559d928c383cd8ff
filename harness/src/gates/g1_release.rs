//! G1's connection accounting (R5.13): the connections a `connect` opened are closed when a
//! second `connect` of the same session replaces them, and when `disconnect` ends it. The
//! engine's `CLIENT LIST` (every primary of a cluster) is the witness: a connector that forgets
//! a session but keeps its socket passes every verb and grows without bound in production.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::connector::{Connector, Verbs};
use crate::engine::Admin;
use crate::gates::{GateContext, GateError, GateOutcome};
use crate::observe::connector_clients;

const SESSION: &str = "r1";
const QUEUE: &str = "g1r";

/// The least time a closed socket is given to leave the engine's client list; the wait is
/// stretched to ten times the slowest connect of the check, so a slow machine waits longer.
const SETTLE_MIN: Duration = Duration::from_secs(5);

/// One connection as the engine lists it: (node, client address).
type Client = (usize, String);

/// The connector's connections on `db` now (the harness's own excluded).
fn clients(admin: &mut Admin, db: u32, harness: &[String]) -> Result<BTreeSet<Client>, GateError> {
    Ok(connector_clients(admin, db, harness)?
        .into_iter()
        .map(|c| (c.node, c.addr))
        .collect())
}

/// Polls until none of `gone` is listed, or `within` passed; what is still listed.
fn still_open(
    admin: &mut Admin,
    db: u32,
    harness: &[String],
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
) -> Result<(), GateError> {
    (ctx.progress)("G1: the connections a session opened are closed when it is replaced or ends");
    let harness = admin.own_addrs()?;
    let mut c = ctx.factory.make()?;
    let before = clients(admin, db, &harness)?;
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
        return Ok(());
    }
    let first: BTreeSet<Client> = clients(admin, db, &harness)?
        .difference(&before)
        .cloned()
        .collect();
    if let Err(e) = timed_connect(&mut *c) {
        out.fail(format!(
            "a second connect of the connected session {SESSION} failed ({})",
            e.evidence()
        ));
        return Ok(());
    }
    let settle = SETTLE_MIN.max(slowest * 10);
    out.figure("release_settle_ms", settle.as_millis() as u64);
    let left = still_open(admin, db, &harness, &first, settle)?;
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
    // A queue on every primary, so a cluster session's node connections open too.
    for q in admin.one_name_per_primary(QUEUE) {
        if let Err(e) = c.enqueue(SESSION, &q, "r", 0) {
            out.fail(format!("enqueue on {q} failed ({})", e.evidence()));
            return Ok(());
        }
    }
    let opened: BTreeSet<Client> = clients(admin, db, &harness)?
        .difference(&before)
        .filter(|k| !first.contains(k))
        .cloned()
        .collect();
    if let Err(e) = c.disconnect(SESSION) {
        out.fail(format!("disconnect of {SESSION} failed ({})", e.evidence()));
        return Ok(());
    }
    let left = still_open(admin, db, &harness, &opened, settle)?;
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
    Ok(())
}
