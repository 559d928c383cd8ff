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
//!
//! [`migrate_atomic`] is Valkey 9's other way (`CLUSTER MIGRATESLOTS`): the engine copies the
//! slot's keys while the source keeps serving it, pauses writes for the cut-over and answers
//! `MOVED` from then on; no `ASK`, no `TRYAGAIN`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::engine::admin::Admin;
use crate::engine::health;
use crate::engine::topology::{NodeId, NodeView, try_wait_until};
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
    /// The database the keys live in (a cluster's run database, SPEC R8.5).
    db: String,
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
            db: engine.db_for(0).to_string(),
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
        let mut args: Vec<&str> = vec![
            "MIGRATE",
            &self.host,
            &port,
            "",
            &self.db,
            MIGRATE_TIMEOUT_MS,
        ];
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
        wait_settled(engine, self.slot, &self.to_id)
    }
}

/// Waits until every node gives `slot` to the node `owner` alone, with no slot in motion.
fn wait_settled(engine: &Engine, slot: u16, owner: &str) -> Result<(), HarnessError> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let h = health::snapshot(engine);
        let views: Vec<&BTreeMap<String, NodeView>> = h
            .nodes
            .values()
            .filter_map(|n| n.as_ref().ok().map(|n| &n.view))
            .collect();
        if views.len() == h.nodes.len() && settled(&views, slot, owner) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(HarnessError::Engine(format!(
                "the cluster did not agree within {} s that slot {slot} moved to node {}",
                SETTLE_WITHIN.as_secs(),
                &owner[..owner.len().min(8)]
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What an atomic migration did, read from the source's `CLUSTER GETSLOTMIGRATIONS`.
#[derive(Debug, Clone)]
pub struct AtomicMove {
    /// From `CLUSTER MIGRATESLOTS` to every node agreeing on the slot's new owner.
    pub took: Duration,
    /// The job's last state as the source reports it (`success` when it returns).
    pub state: String,
    /// The keys of the slot on the target once every node agreed it owns the slot.
    pub keys: u64,
}

/// True when the engine has `CLUSTER MIGRATESLOTS` (Valkey 9.0 and later).
pub fn has_atomic(admin: &mut Admin) -> Result<bool, HarnessError> {
    let info: Vec<redis::Value> = admin.query(&["COMMAND", "INFO", "cluster|migrateslots"])?;
    Ok(info.iter().any(|v| !matches!(v, redis::Value::Nil)))
}

/// Moves `slot` from the primary `from` to the primary `to` with `CLUSTER MIGRATESLOTS` (sent to
/// the source), waits for the source's job to end and every node to agree. A job that ends
/// `failed` or `cancelled` is the engine's error, with the engine's own message.
pub fn migrate_atomic(
    engine: &Engine,
    slot: u16,
    from: NodeId,
    to: NodeId,
) -> Result<AtomicMove, HarnessError> {
    let t0 = Instant::now();
    let (mut src, _) = connect(engine, from)?;
    let (mut dst, to_id) = connect(engine, to)?;
    let s = slot.to_string();
    let before: Vec<String> = jobs(&mut src)?
        .into_iter()
        .filter_map(|j| j.get("name").cloned())
        .collect();
    src.query::<()>(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &s,
        &s,
        "NODE",
        &to_id,
    ])?;
    let mut last = BTreeMap::new();
    try_wait_until(&format!("the atomic migration of slot {slot}"), || {
        let all = jobs(&mut src)?;
        last = new_export(&all, &before, &to_id)
            .cloned()
            .unwrap_or_default();
        Ok(last
            .get("state")
            .is_some_and(|st| TERMINAL.contains(&st.as_str())))
    })?;
    let state = last.get("state").cloned().unwrap_or_default();
    if state != "success" {
        return Err(HarnessError::Engine(format!(
            "the engine's atomic migration of slot {slot} ended {state}: {}",
            last.get("message").map_or("(no message)", String::as_str)
        )));
    }
    wait_settled(engine, slot, &to_id)?;
    let took = t0.elapsed();
    Ok(AtomicMove {
        took,
        state,
        keys: dst.query(&["CLUSTER", "COUNTKEYSINSLOT", &s])?,
    })
}

/// The states a `CLUSTER GETSLOTMIGRATIONS` job ends in.
const TERMINAL: [&str; 3] = ["success", "failed", "cancelled"];

/// The source's migration jobs, each as its scalar fields.
fn jobs(src: &mut Admin) -> Result<Vec<BTreeMap<String, String>>, HarnessError> {
    let v: redis::Value = src.query(&["CLUSTER", "GETSLOTMIGRATIONS"])?;
    Ok(parse_jobs(&v))
}

/// `CLUSTER GETSLOTMIGRATIONS`'s reply (an array of maps, flat key-value arrays in RESP2) as
/// string fields; nested values are left out.
fn parse_jobs(v: &redis::Value) -> Vec<BTreeMap<String, String>> {
    use redis::Value as V;
    let scalar = |v: &V| match v {
        V::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        V::SimpleString(s) | V::VerbatimString { text: s, .. } => Some(s.clone()),
        V::Int(i) => Some(i.to_string()),
        _ => None,
    };
    let V::Array(entries) = v else {
        return Vec::new();
    };
    entries
        .iter()
        .map(|e| {
            let pairs: Vec<(&V, &V)> = match e {
                V::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
                V::Array(flat) => flat
                    .chunks(2)
                    .filter_map(|c| Some((c.first()?, c.get(1)?)))
                    .collect(),
                _ => Vec::new(),
            };
            pairs
                .into_iter()
                .filter_map(|(k, v)| Some((scalar(k)?, scalar(v)?)))
                .collect()
        })
        .collect()
}

/// The export job to `to_id` that is not among the jobs named `before`.
fn new_export<'a>(
    all: &'a [BTreeMap<String, String>],
    before: &[String],
    to_id: &str,
) -> Option<&'a BTreeMap<String, String>> {
    all.iter().find(|j| {
        j.get("operation")
            .is_some_and(|o| o.eq_ignore_ascii_case("export"))
            && j.get("target_node").map(String::as_str) == Some(to_id)
            && j.get("name").is_some_and(|n| !before.contains(n))
    })
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

    #[test]
    fn the_new_export_job_is_read_from_either_reply_form() {
        use redis::Value as V;
        let bulk = |s: &str| V::BulkString(s.as_bytes().to_vec());
        let job = |name: &str, op: &str, state: &str| {
            vec![
                bulk("name"),
                bulk(name),
                bulk("operation"),
                bulk(op),
                bulk("target_node"),
                bulk("b"),
                bulk("create_time"),
                V::Int(17),
                bulk("state"),
                bulk(state),
                bulk("message"),
                bulk(""),
            ]
        };
        let flat = V::Array(vec![
            V::Array(job("old", "EXPORT", "success")),
            V::Array(job("imp", "IMPORT", "replicating")),
            V::Array(job("new", "EXPORT", "snapshotting")),
        ]);
        let jobs = parse_jobs(&flat);
        assert_eq!(jobs.len(), 3);
        assert_eq!(jobs[0]["create_time"], "17");
        let found = new_export(&jobs, &["old".to_string()], "b").unwrap();
        assert_eq!(found["state"], "snapshotting");
        assert!(new_export(&jobs, &["old".into(), "new".into()], "b").is_none());
        assert!(new_export(&jobs, &[], "c").is_none());
        let pairs = job("new", "EXPORT", "failed");
        let map = V::Array(vec![V::Map(
            pairs
                .chunks(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect(),
        )]);
        assert_eq!(parse_jobs(&map)[0]["state"], "failed");
        assert!(parse_jobs(&V::Nil).is_empty());
    }
}
