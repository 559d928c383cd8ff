//! What the harness asks of a Sentinel engine, by [`NodeId`] for its data nodes and by
//! [`SentinelId`] for its Sentinels: the Sentinels and their proxies, the primary each names, and
//! the waits of its boot and of a failover. Every wait is bounded ([`try_wait_until`]) and its
//! error names the node or Sentinel that held it up, with its port ([`held_up`]).

use std::collections::BTreeSet;

use super::{PRIMARY_NAME, Running};
use crate::engine::acl::url_of;
use crate::engine::admin::Admin;
use crate::engine::proxied::Node;
use crate::engine::topology::view::{SentinelEntry, following_port, parse_sentinel_entry};
use crate::engine::topology::{NodeId, Role, SentinelId, try_wait_until};
use crate::engine::{Engine, Handle};
use crate::error::HarnessError;
use crate::faults::Proxy;

impl Engine {
    fn sentinel_running(&self) -> Result<&Running, HarnessError> {
        match &self.handle {
            Handle::Sentinel(s) => Ok(s),
            _ => Err(HarnessError::Engine(
                "this engine has no Sentinels: it is not a Sentinel engine".into(),
            )),
        }
    }

    fn sentinel_node(&self, id: SentinelId) -> Result<&Node, HarnessError> {
        self.sentinel_running()?
            .sentinels
            .get(id.index())
            .ok_or_else(|| HarnessError::Engine(format!("no {id} in this engine")))
    }

    /// Every Sentinel, in boot order; none on an engine without.
    pub fn sentinels(&self) -> Vec<SentinelId> {
        let n = self.sentinel_running().map_or(0, |s| s.sentinels.len());
        (0..n).map(SentinelId::new).collect()
    }

    /// The fault proxy in front of Sentinel `id`: the address it announces, a client's way in.
    pub fn sentinel_proxy(&self, id: SentinelId) -> Result<&Proxy, HarnessError> {
        Ok(&self.sentinel_node(id)?.proxy)
    }

    /// The port Sentinel `id` listens on, for evidence.
    pub fn sentinel_port(&self, id: SentinelId) -> Result<u16, HarnessError> {
        Ok(self.sentinel_node(id)?.port())
    }

    /// The Sentinel one of whose ports is `port` (its own or its proxy's).
    pub fn sentinel_at(&self, port: u16) -> Option<SentinelId> {
        self.sentinel_running()
            .ok()?
            .sentinel_at(port)
            .map(SentinelId::new)
    }

    /// The harness's connection to Sentinel `id`: its own port, as the admin.
    pub fn sentinel_admin(&self, id: SentinelId) -> Result<Admin, HarnessError> {
        let port = self.sentinel_node(id)?.admin_port();
        Admin::connect(&url_of(&self.host, port, &self.admin_auth, 0))
    }

    /// The url of Sentinel `id` for the connector's user, at the port the harness reaches it by
    /// (its own): to check what that user may ask a Sentinel, and hear what it may hear.
    pub fn sentinel_connector_url(&self, id: SentinelId) -> Result<String, HarnessError> {
        let port = self.sentinel_node(id)?.admin_port();
        Ok(url_of(&self.host, port, &self.connector_auth, 0))
    }

    /// The data node Sentinel `id` names as the primary (`SENTINEL get-master-addr-by-name`);
    /// an error naming the Sentinel when it does not answer, names none, or names an address that
    /// is no node's.
    pub fn primary_by(&self, id: SentinelId) -> Result<NodeId, HarnessError> {
        self.primary_named(&mut self.sentinel_admin(id)?, id)
    }

    /// [`Engine::primary_by`] on a connection to Sentinel `id`.
    fn primary_named(&self, admin: &mut Admin, id: SentinelId) -> Result<NodeId, HarnessError> {
        let port = self.sentinel_port(id)?;
        let addr: Option<(String, String)> =
            admin.query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", PRIMARY_NAME])?;
        let (host, named) = addr
            .ok_or_else(|| HarnessError::Engine(format!("{id} (port {port}) names no primary")))?;
        named
            .parse()
            .ok()
            .and_then(|p| self.node_at(p))
            .ok_or_else(|| {
                HarnessError::Engine(format!(
                    "{id} (port {port}) names {host}:{named}, which is no node's"
                ))
            })
    }

    /// [`Engine::primary_by`] of every Sentinel, in boot order.
    pub fn primary_by_sentinel(&self) -> Vec<Result<NodeId, HarnessError>> {
        self.sentinels()
            .into_iter()
            .map(|id| self.primary_by(id))
            .collect()
    }

    /// The primary every Sentinel names, when they all answer and agree.
    pub fn agreed_primary(&self) -> Result<NodeId, String> {
        let named = self.primary_by_sentinel();
        let first = match named.first() {
            Some(Ok(first)) => *first,
            _ => return Err(describe(&named)),
        };
        if named.iter().all(|n| n.as_ref().is_ok_and(|n| *n == first)) {
            Ok(first)
        } else {
            Err(describe(&named))
        }
    }

    /// What a Sentinel says of `PRIMARY_NAME`'s replicas or its peer Sentinels (`what`:
    /// `REPLICAS` or `SENTINELS`).
    fn sentinel_entries(admin: &mut Admin, what: &str) -> Result<Vec<SentinelEntry>, String> {
        let entries: Vec<std::collections::BTreeMap<String, String>> = admin
            .query(&["SENTINEL", what, PRIMARY_NAME])
            .map_err(|e| e.to_string())?;
        Ok(entries.iter().map(parse_sentinel_entry).collect())
    }

    /// `Ok` when Sentinel `id` names `primary`, knows every other data node as a replica that
    /// is up, and every other Sentinel as a peer that is up, all at the ports they announce;
    /// else what it lacks.
    fn sentinel_settled(&self, id: SentinelId, primary: NodeId) -> Result<(), String> {
        let who = format!("{id} (port {})", self.sentinel_port(id).unwrap_or(0));
        let mut admin = self.sentinel_admin(id).map_err(|e| e.to_string())?;
        let named = self
            .primary_named(&mut admin, id)
            .map_err(|e| e.to_string())?;
        if named != primary {
            return Err(format!("{who} names {named} as the primary, not {primary}"));
        }
        let up = |entries: Vec<SentinelEntry>, role: Option<Role>| -> BTreeSet<u16> {
            entries
                .iter()
                .filter(|e| !e.down && e.role == role)
                .filter_map(|e| e.port)
                .collect()
        };
        let replicas = up(
            Self::sentinel_entries(&mut admin, "REPLICAS")?,
            Some(Role::Replica),
        );
        let want: BTreeSet<u16> = self
            .nodes()
            .into_iter()
            .filter(|n| *n != primary)
            .map(|n| self.announced_port(n))
            .collect();
        if replicas != want {
            return Err(format!(
                "{who} knows the replicas at ports {replicas:?} up, not {want:?}"
            ));
        }
        let peers = up(Self::sentinel_entries(&mut admin, "SENTINELS")?, None);
        let want: BTreeSet<u16> = self
            .sentinels()
            .into_iter()
            .filter(|s| *s != id)
            .filter_map(|s| self.sentinel_proxy(s).ok().map(Proxy::port))
            .collect();
        if peers != want {
            return Err(format!(
                "{who} knows the Sentinels at ports {peers:?} up, not {want:?}"
            ));
        }
        Ok(())
    }

    /// The boot's wait: every replica in sync with node 0, and every Sentinel settled on it
    /// ([`Engine::sentinel_settled`]).
    pub(in crate::engine) fn wait_sentinel_ready(&self) -> Result<(), HarnessError> {
        self.wait_settled(NodeId::new(0))
    }

    /// Every replica in sync with `primary`, and every Sentinel settled on it: after a boot, and
    /// after a failover once the old primary follows the new one.
    pub fn wait_settled(&self, primary: NodeId) -> Result<(), HarnessError> {
        for replica in self.nodes().into_iter().filter(|n| *n != primary) {
            self.wait_in_sync(primary, replica)?;
        }
        let what = format!(
            "the Sentinels agreeing on the primary {primary} (port {}), its replicas and each other",
            self.port_of(primary)
        );
        let mut missing = String::new();
        try_wait_until(&what, || {
            let settled = self
                .sentinels()
                .into_iter()
                .try_for_each(|id| self.sentinel_settled(id, primary));
            Ok(noting(&mut missing, settled))
        })
        .map_err(|e| held_up(e, &missing))
        .map(drop)
    }

    /// `SENTINEL FAILOVER` of the primary, asked of the first Sentinel: coordinated where the
    /// engine can (Valkey 9: the primary pauses writes and hands over to the replica, losing
    /// nothing), else forced. Asked again while the Sentinel answers that no replica is fit yet
    /// (`NOGOODSLAVE`: it has not refreshed them) or a failover is under way (`INPROG`). True
    /// when it was coordinated.
    pub fn sentinel_failover(&self) -> Result<bool, HarnessError> {
        let mut missing = String::new();
        let coordinated = std::cell::Cell::new(true);
        let ask = || -> Result<(), String> {
            let mut a = self
                .sentinel_admin(SentinelId::new(0))
                .map_err(|e| e.to_string())?;
            let failover = |a: &mut Admin, extra: &[&str]| {
                let mut args = vec!["SENTINEL", "FAILOVER", PRIMARY_NAME];
                args.extend_from_slice(extra);
                a.query::<String>(&args)
                    .map(drop)
                    .map_err(|e| e.to_string())
            };
            match failover(&mut a, &["COORDINATED"]) {
                Err(e) if e.contains("NOGOODPRIMARY") => {
                    coordinated.set(false);
                    failover(&mut a, &[])
                }
                other => other,
            }
        };
        try_wait_until("a Sentinel taking SENTINEL FAILOVER", || {
            Ok(noting(&mut missing, ask()))
        })
        .map_err(|e| held_up(e, &missing))?;
        Ok(coordinated.get())
    }

    /// Waits until every Sentinel names one primary other than `old`, and that node says it is
    /// a primary; returns it.
    pub fn wait_for_new_primary(&self, old: NodeId) -> Result<NodeId, HarnessError> {
        let what = format!(
            "the Sentinels agreeing on a new primary in place of {old} (port {})",
            self.port_of(old)
        );
        let mut new = None;
        let mut check = || {
            let named = self.agreed_primary()?;
            if named == old {
                return Err(format!("every Sentinel still names {old}"));
            }
            if self.role(named) != Some(Role::Primary) {
                let port = self.port_of(named);
                return Err(format!(
                    "they name {named} (port {port}), not a primary yet"
                ));
            }
            new = Some(named);
            Ok(())
        };
        let mut missing = String::new();
        try_wait_until(&what, || Ok(noting(&mut missing, check())))
            .map_err(|e| held_up(e, &missing))?;
        new.ok_or_else(|| HarnessError::Engine(format!("{what}: no primary")))
    }

    /// Waits until `replica` follows `primary` (at any of its ports) with its link up.
    pub fn wait_following(&self, replica: NodeId, primary: NodeId) -> Result<(), HarnessError> {
        let what = format!(
            "{replica} (port {}) following {primary} (port {})",
            self.port_of(replica),
            self.port_of(primary)
        );
        let check = || {
            let info = self
                .node_admin(replica)
                .and_then(|mut a| a.info("replication"))
                .map_err(|e| e.to_string())?;
            match following_port(&info) {
                Some(p) if self.node_at(p) == Some(primary) => Ok(()),
                Some(p) => Err(format!("it follows port {p}")),
                None => Err("it follows no primary with its link up".into()),
            }
        };
        let mut missing = String::new();
        try_wait_until(&what, || Ok(noting(&mut missing, check())))
            .map_err(|e| held_up(e, &missing))
            .map(drop)
    }
}

/// A wait's check that says what is still missing (`Err`), as [`try_wait_until`] asks it: not
/// yet (never an error, so a Sentinel that does not answer is polled again), the text kept in
/// `missing` for [`held_up`].
pub(super) fn noting(missing: &mut String, check: Result<(), String>) -> bool {
    check.map_err(|m| *missing = m).is_ok()
}

/// The error of a wait that ran out, ending with the last thing `missing`: it names the node or
/// Sentinel that held it up.
pub(super) fn held_up(e: HarnessError, missing: &str) -> HarnessError {
    match e {
        HarnessError::Engine(m) => HarnessError::Engine(format!("{m}: {missing}")),
        other => other,
    }
}

/// What each Sentinel named, in one line.
fn describe(named: &[Result<NodeId, HarnessError>]) -> String {
    named
        .iter()
        .enumerate()
        .map(|(i, n)| match n {
            Ok(node) => format!("{}: {node}", SentinelId::new(i)),
            Err(e) => format!("{}: {e}", SentinelId::new(i)),
        })
        .collect::<Vec<_>>()
        .join("; ")
}
