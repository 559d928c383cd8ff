//! The fault phase's proxies: where its faults are armed (its own proxy in front of a single
//! engine, or the proxy of each cluster node), apart from the trials that arm them.

use crate::engine::Admin;
use crate::faults::Proxy;
use crate::gates::GateError;

/// A cluster node and a slot it owns, for evidence.
pub(super) type NodeSlot = (
    crate::engine::topology::NodeId,
    crate::engine::admin::shards::Slot,
);

/// Where the phase's faults are armed: its own proxy in front of a single engine, or the proxies
/// a cluster's nodes announce.
pub(super) enum Proxies<'a> {
    Single(crate::gates::GateProxy<'a>),
    Cluster(&'a crate::engine::Engine),
}

impl Proxies<'_> {
    /// The proxy that carries queue `q`'s calls, and on a cluster the node and slot, for
    /// evidence.
    pub(super) fn of(
        &self,
        admin: &Admin,
        q: &str,
    ) -> Result<(&Proxy, Option<NodeSlot>), GateError> {
        match self {
            Self::Single(p) => Ok((p, None)),
            Self::Cluster(engine) => {
                let node = engine.primary_of(admin, q)?;
                let slot = crate::engine::admin::shards::slot(q.as_bytes());
                let p = engine.proxy_of(node)?;
                Ok((p, Some((node, slot))))
            }
        }
    }

    /// The proxy a `connect` opens its first connection through (the seed's, on a cluster).
    pub(super) fn seed(&self) -> Option<&Proxy> {
        match self {
            Self::Single(p) => Some(p),
            Self::Cluster(engine) => engine.proxy_of(engine.seed()).ok(),
        }
    }

    /// Disarms every proxy and forgets what fired; true when a rule was left unfired.
    pub(super) fn disarm(&self, admin: &Admin) -> bool {
        let mut unfired = false;
        let mut each = |p: &Proxy| {
            unfired |= !p.disarm().is_empty();
            p.take_fired();
        };
        match self {
            Self::Single(p) => each(p),
            Self::Cluster(engine) => engine
                .primaries(admin)
                .into_iter()
                .filter_map(|node| engine.proxy_of(node).ok())
                .for_each(each),
        }
        unfired
    }

    /// Connections accepted and commands seen, over every proxy.
    pub(super) fn counts(&self, admin: &Admin) -> (u64, u64) {
        match self {
            Self::Single(p) => p.counts(),
            Self::Cluster(engine) => engine
                .primaries(admin)
                .into_iter()
                .filter_map(|node| engine.proxy_of(node).ok())
                .map(Proxy::counts)
                .fold((0, 0), |(a, b), (c, d)| (a + c, b + d)),
        }
    }
}
