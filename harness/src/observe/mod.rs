//! What a connector really sent, seen on the engine: `MONITOR` lines parsed and attributed.
//!
//! A `MONITOR` line is `1700000000.123456 [<db> <addr>] "CMD" "arg" ...`; commands run inside a
//! script appear as `[<db> lua] "CMD" ...` (Valkey 9 prints the database number there) right after
//! the `EVALSHA`/`EVAL` that ran them: scripts are atomic, so nothing interleaves.
//!
//! Attribution: a [`Watch`] knows the harness's own connections (the admin's and the monitor's) and
//! the gate's database. Every other client address with a line tagged with that database is a
//! connector connection; all its lines (also those before its `SELECT`) are the connector's, and
//! each `lua` line of that database belongs to the latest script call from a connector connection.
//! Attribution by exclusion (rather than by a `CLIENT LIST` taken at one moment) also catches
//! connections that closed before anyone could list them: a refused connect, a killed session.

use std::collections::BTreeSet;

use crate::connector::{Connector, Verbs};
use crate::engine::Admin;
use crate::engine::admin::Monitor;
use crate::error::{ConnectorError, HarnessError};

pub mod attribute;
pub mod line;
pub mod reconnect;

pub use attribute::{Event, Observed, ScriptCall, attribute};
pub use line::{Line, is_script_cmd, keys_of, names_emq_key, parse_line, stable};

/// A `MONITOR` on one gate database (on every primary of a cluster), knowing the harness's own
/// connections.
///
/// [`Monitor::stop`] ends on a marker it sends itself, so a watch either sees every line sent
/// before `stop` or errors: a gate must not judge a partial view.
pub struct Watch {
    monitors: Vec<Monitor>,
    db: u32,
    /// The harness's own connections, on any node (what a kill round spares).
    harness: BTreeSet<String>,
    /// The harness's own connections as each monitored node sees them, in the monitors' order:
    /// a node's lines are attributed against its own (an address seen on one node may be a
    /// connector's on another).
    by_node: Vec<BTreeSet<String>>,
}

impl Watch {
    /// Starts monitoring database `db` of `engine`; `admin` is the gate's admin connection
    /// (excluded from attribution), `extra` any further harness client ids (on the seed node).
    pub fn start(admin: &mut Admin, db: u32, extra: &[u64]) -> Result<Self, HarnessError> {
        let monitors = admin.monitors()?;
        let mut by_node = admin.own_addrs_by_node()?;
        if by_node.len() != monitors.len() || by_node.iter().flatten().any(String::is_empty) {
            return Err(HarnessError::Engine(
                "CLIENT INFO does not show the harness's own connections".into(),
            ));
        }
        for (own, m) in by_node.iter_mut().zip(&monitors) {
            own.insert(m.addr.clone());
        }
        if !extra.is_empty() {
            for c in admin.client_list()? {
                if extra.contains(&c.id)
                    && let Some(own) = by_node.get_mut(c.node)
                {
                    own.insert(c.addr);
                }
            }
        }
        // Checked above: every node names the admin's connection and its monitor's.
        let harness: BTreeSet<String> = by_node.iter().flatten().cloned().collect();
        Ok(Self {
            monitors,
            db,
            harness,
            by_node,
        })
    }

    /// Counts `addrs` as the harness's own (another admin's connections, on whichever node).
    pub fn exclude(&mut self, addrs: Vec<String>) {
        for own in &mut self.by_node {
            own.extend(addrs.iter().cloned());
        }
        self.harness.extend(addrs);
    }

    /// The harness's own connections this watch knows (the admin's and the monitors'): a kill
    /// round must spare them.
    pub fn harness_addrs(&self) -> Vec<String> {
        self.harness.iter().cloned().collect()
    }

    /// Stops and attributes what was seen: each node's lines on their own (a script's `lua`
    /// lines follow its call on the node that ran it), then merged.
    pub fn stop(self) -> Result<Observed, HarnessError> {
        let mut seen = Vec::new();
        for (m, own) in self.monitors.into_iter().zip(&self.by_node) {
            let lines = m.stop()?;
            seen.push(attribute(&lines, self.db, own));
        }
        Ok(Observed::merge(seen))
    }
}

/// The connector's clients on `db`: every client of that database but the `harness` addresses
/// (on a cluster, the clients of every primary). On a cluster, also every client of another
/// database that is not the harness's user: a node connection is in database 0 between its
/// `AUTH` and its `SELECT` (R8.5), and one caught there is the connector's all the same (only one
/// gate runs on a cluster at a time, so no other gate's connector is there to take).
pub fn connector_clients(
    admin: &mut Admin,
    db: u32,
    harness: &[String],
) -> Result<Vec<crate::engine::admin::ClientInfo>, HarnessError> {
    let own = admin.is_cluster().then(|| admin.user().to_string());
    Ok(admin
        .client_list()?
        .into_iter()
        .filter(|c| !harness.contains(&c.addr))
        .filter(|c| c.db == db || own.as_ref().is_some_and(|u| &c.user != u))
        .collect())
}

/// A short workload through every transition on `queue`: both enqueue branches, claim, complete,
/// retry (to delayed), promote, reap, and the two reads.
pub fn every_transition(
    c: &mut (dyn Connector + Send),
    session: &str,
    queue: &str,
) -> Result<(), ConnectorError> {
    c.enqueue(session, queue, "alpha", 0)?;
    c.enqueue(session, queue, "beta \"quoted\"\n", 0)?;
    c.enqueue(session, queue, "gamma", 0)?;
    c.enqueue(session, queue, "later", 3_600_000)?;
    c.browse(session, queue, 0, 10)?;
    c.pending_size(session, queue)?;
    if let Some(j) = c.claim(session, queue, 60_000)? {
        c.complete(session, queue, &j.id, j.attempts)?;
    }
    if let Some(j) = c.claim(session, queue, 0)? {
        c.retry(session, queue, &j.id, j.attempts, 0, 5)?;
    }
    c.promote(session, queue, 10)?;
    if c.claim(session, queue, 0)?.is_some() {
        c.reap(session, queue, 5, 10)?;
    }
    if let Some(j) = c.claim(session, queue, 0)? {
        c.retry(session, queue, &j.id, j.attempts, 0, 1)?;
    }
    Ok(())
}
