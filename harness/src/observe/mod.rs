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
    /// The harness's own connections as each monitored node sees them, in the monitors' order:
    /// a node's lines are attributed against its own, and a kill round spares them there (an
    /// address seen on one node may be a connector's on another).
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
        Ok(Self {
            monitors,
            db,
            by_node,
        })
    }

    /// Counts another admin's connections as the harness's own, node by node
    /// ([`Admin::own_addrs_by_node`] of an admin of the same engine, so in the same node order).
    pub fn exclude(&mut self, by_node: &[BTreeSet<String>]) -> Result<(), HarnessError> {
        if by_node.len() != self.by_node.len() {
            return Err(HarnessError::Engine(format!(
                "an admin sees {} primaries where the watch sees {}: the nodes changed",
                by_node.len(),
                self.by_node.len()
            )));
        }
        for (own, more) in self.by_node.iter_mut().zip(by_node) {
            own.extend(more.iter().cloned());
        }
        Ok(())
    }

    /// The harness's own connections this watch knows, as each node sees them (the admin's and
    /// the monitors'): a kill round must spare them.
    pub fn harness_by_node(&self) -> Vec<BTreeSet<String>> {
        self.by_node.clone()
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
/// of its node (on a cluster, the clients of every primary; `harness` in the admin's node order,
/// as [`Admin::own_addrs_by_node`] gives it: a connection's local port is unique per destination
/// only, so one flat list spared a connector's connection to one node that had the address of
/// the harness's to another, kill after kill). On a cluster, also every client of another
/// database that is not the harness's user: a node connection is in database 0 between its
/// `AUTH` and its `SELECT` (R8.5), and one caught there is the connector's all the same (only one
/// gate runs on a cluster at a time, so no other gate's connector is there to take).
pub fn connector_clients(
    admin: &mut Admin,
    db: u32,
    harness: &[BTreeSet<String>],
) -> Result<Vec<crate::engine::admin::ClientInfo>, HarnessError> {
    let own = admin.is_cluster().then(|| admin.user().to_string());
    Ok(admin
        .client_list()?
        .into_iter()
        .filter(|c| !harness.get(c.node).is_some_and(|own| own.contains(&c.addr)))
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
