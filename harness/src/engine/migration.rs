//! A live slot migration, the way `valkey-cli --cluster reshard` does it (`CLUSTER SETSLOT
//! IMPORTING`/`MIGRATING`, `MIGRATE`, `CLUSTER SETSLOT NODE`), in steps a gate interleaves with a
//! connector's calls (SPEC R8.6, R8.7).
//!
//! The slot's keys move in ONE `MIGRATE`, not in batches: EchoMQ's scripts touch job hashes that
//! are not among their declared keys (ARGV[1] is the job root), so a queue split between two nodes
//! can fail a script part-way ("Attempted to access a non local key", SPEC §8). One `MIGRATE`
//! blocks the source while it runs, so no client sees half a queue.
//!
//! Hand-written because no crate drives a migration step by step: `valkey-cli --cluster reshard`
//! runs it to the end in one go, with batches.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::engine::admin::Admin;
use crate::engine::health;
use crate::engine::topology::{NodeId, NodeView};
use crate::error::HarnessError;

/// How long the cluster may take to agree on the slot's new owner.
const SETTLE_WITHIN: Duration = Duration::from_secs(30);
/// `MIGRATE`'s own timeout, ms.
const MIGRATE_TIMEOUT_MS: &str = "10000";

/// One slot on its way from one primary to another.
pub struct SlotMove {
    pub slot: u16,
    from: Admin,
    to: Admin,
    to_id: String,
    to_real_port: u16,
    host: String,
    /// The admin user and password `MIGRATE` authenticates with on the target.
    user: Option<String>,
    password: Option<String>,
}

fn connect(engine: &Engine, node: NodeId) -> Result<(Admin, String), HarnessError> {
    let mut a = engine.node_admin(node)?;
    let id: String = a.query(&["CLUSTER", "MYID"])?;
    Ok((a, id))
}

impl SlotMove {
    /// Marks `slot` importing on the primary `to` and migrating on the primary `from`: from now on the source answers `ASK` for keys it no longer holds and
    /// `TRYAGAIN` for calls whose keys it holds only in part.
    pub fn begin(
        engine: &Engine,
        slot: u16,
        from: NodeId,
        to: NodeId,
    ) -> Result<Self, HarnessError> {
        let (mut from_admin, from_id) = connect(engine, from)?;
        let (mut to_admin, to_id) = connect(engine, to)?;
        let s = slot.to_string();
        to_admin.query::<()>(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id])?;
        from_admin.query::<()>(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id])?;
        Ok(Self {
            slot,
            from: from_admin,
            to: to_admin,
            to_id,
            to_real_port: engine.port_of(to),
            host: engine.host.clone(),
            user: engine.admin_user().map(str::to_string),
            password: engine.password().map(str::to_string),
        })
    }

    /// Moves every key of the slot to the target in one `MIGRATE`; returns how many.
    pub fn move_keys(&mut self) -> Result<usize, HarnessError> {
        let keys: Vec<String> =
            self.from
                .query(&["CLUSTER", "GETKEYSINSLOT", &self.slot.to_string(), "100000"])?;
        if keys.is_empty() {
            return Ok(0);
        }
        let port = self.to_real_port.to_string();
        let mut args: Vec<&str> = vec!["MIGRATE", &self.host, &port, "", "0", MIGRATE_TIMEOUT_MS];
        // `AUTH2 user password`: the target's `default` user is off (R4.19's users).
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => args.extend(["AUTH2", u.as_str(), p.as_str()]),
            (None, Some(p)) => args.extend(["AUTH", p.as_str()]),
            _ => {}
        }
        args.push("KEYS");
        args.extend(keys.iter().map(String::as_str));
        self.from.query::<()>(&args)?;
        Ok(keys.len())
    }

    /// The target's own admin connection (e.g. to flush its script cache mid-migration).
    pub fn target(&mut self) -> &mut Admin {
        &mut self.to
    }

    /// Gives the slot to the target on the target, the source and every other primary, then
    /// waits until every node agrees (no node lists the slot as migrating or importing).
    pub fn finish(mut self, engine: &Engine) -> Result<(), HarnessError> {
        let s = self.slot.to_string();
        let node = [
            "CLUSTER",
            "SETSLOT",
            s.as_str(),
            "NODE",
            self.to_id.as_str(),
        ];
        self.to.query::<()>(&node)?;
        self.from.query::<()>(&node)?;
        let deadline = Instant::now() + SETTLE_WITHIN;
        loop {
            let h = health::snapshot(engine);
            let views: Vec<&BTreeMap<String, NodeView>> = h
                .nodes
                .values()
                .filter_map(|n| n.as_ref().ok().map(|n| &n.view))
                .collect();
            if views.len() == h.nodes.len() && settled(&views, self.slot, &self.to_id) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(HarnessError::Engine(format!(
                    "the cluster did not agree within {} s that slot {} moved to node {}",
                    SETTLE_WITHIN.as_secs(),
                    self.slot,
                    &self.to_id[..self.to_id.len().min(8)]
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// True when a `CLUSTER NODES` slot entry (`5`, `0-5460`) covers `slot`.
fn covers(entry: &str, slot: u16) -> bool {
    let mut ends = entry.splitn(2, '-').map(|n| n.parse::<u16>());
    match (ends.next(), ends.next()) {
        (Some(Ok(a)), None) => a == slot,
        (Some(Ok(a)), Some(Ok(b))) => (a..=b).contains(&slot),
        _ => false,
    }
}

/// True when every node's view gives `slot` to `owner` alone and lists no slot in motion.
pub fn settled(views: &[&BTreeMap<String, NodeView>], slot: u16, owner: &str) -> bool {
    views.iter().all(|view| {
        view.iter().all(|(id, v)| {
            let holds = v.slots.iter().any(|e| covers(e, slot));
            v.slots.iter().all(|e| !e.starts_with('[')) && holds == (id == owner)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(lines: &str) -> BTreeMap<String, NodeView> {
        crate::engine::topology::parse_nodes(lines)
    }

    #[test]
    fn a_slot_is_settled_when_every_view_gives_it_to_the_target_alone() {
        let before = view(
            "a 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-5460\n\
             b 127.0.0.1:3@4 master - 0 0 2 connected 5461-16383\n",
        );
        let moving = view(
            "a 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-5460 [100->-b]\n\
             b 127.0.0.1:3@4 master - 0 0 2 connected 5461-16383\n",
        );
        let after = view(
            "a 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-99 101-5460\n\
             b 127.0.0.1:3@4 master - 0 0 3 connected 100 5461-16383\n",
        );
        assert!(!settled(&[&before], 100, "b"));
        assert!(!settled(&[&moving], 100, "b"));
        assert!(settled(&[&after], 100, "b"));
        assert!(!settled(&[&after, &before], 100, "b"));
        assert!(covers("100", 100) && covers("0-5460", 100) && !covers("101-200", 100));
        assert!(!covers("[100->-b]", 100));
    }
}
