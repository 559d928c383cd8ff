//! Permission doubles: connectors that take a path SPEC permits (a *may*, an *either/or*, a
//! "both are fine") the other way than the reference takes it, and are correct in every other
//! respect. Each must PASS every gate on every engine: the other side of the broken doubles,
//! which must FAIL. A gate that fails one is stricter than SPEC, and a connector written to the
//! letter would meet the same false FAIL. The rule catalogue names each with the permission it
//! takes (`crate::gates::rules::permits`); `tests/permits.rs` runs them.

#[cfg(feature = "doubles")]
use std::sync::Arc;

#[cfg(feature = "doubles")]
use crate::connector::reference::{Permits, Reference};
#[cfg(feature = "doubles")]
use crate::connector::{Connector, ConnectorFactory};
#[cfg(feature = "doubles")]
use crate::error::HarnessError;
#[cfg(feature = "doubles")]
use crate::protocol::bundle::Bundle;

/// A connector that takes one permitted path (or all of them: [`Taker::Permissive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Taker {
    /// After a failed verb, reconnects by itself on the next one; a read verb runs on the new
    /// connection before the fence read, which comes before its first script (as a Ruby
    /// connector written from SPEC did).
    ReconnectReadsFirst,
    /// `browse` reads each payload with `HMGET` instead of `HGET`.
    HmgetPayloads,
    /// Every connection speaks RESP3: `HELLO 3 AUTH user password` in place of `AUTH`.
    Resp3Hello,
    /// Every new connection sends `PING`, `CLIENT SETNAME` and an empty `MULTI`/`DISCARD` first.
    GreetsEachConnection,
    /// `PING` before every verb.
    PingsEveryVerb,
    /// A 3 s read timeout (the shortest SPEC allows); a connection that timed out is closed and
    /// replaced by a fenced one.
    ShortestReadTimeout,
    /// Each pipelined command of a `batch` is its own write.
    WritePerCommand,
    /// On a cluster, a connection to every primary at `connect`, not lazily.
    EagerNodeConnections,
    /// A `batch` sends its first enqueue alone, then pipelines of `depth`.
    LoneFirstEnqueue,
    /// On a cluster, the slot map is read from `CLUSTER SHARDS` (pipelines dial each node's
    /// `endpoint`), and `CLUSTER NODES` is read too.
    ReadsEverySlotMap,
    /// `connect` dials once more when its first connection is closed before the fence read.
    RedialsAtConnect,
    /// A script call answered `TRYAGAIN` or `CLUSTERDOWN` is sent again after a pause, for a
    /// bounded time.
    RetriesTryagain,
    /// Behind Sentinel, asks each Sentinel also `SENTINEL sentinels` and
    /// `get-primary-addr-by-name`, and subscribes to `+switch-master` there (P11.1).
    SentinelExtras,
    /// Every permission above at once.
    Permissive,
}

impl Taker {
    /// Every permission double, in the order the self-tests run them.
    pub const ALL: [Taker; 14] = [
        Taker::ReconnectReadsFirst,
        Taker::HmgetPayloads,
        Taker::Resp3Hello,
        Taker::GreetsEachConnection,
        Taker::PingsEveryVerb,
        Taker::ShortestReadTimeout,
        Taker::WritePerCommand,
        Taker::EagerNodeConnections,
        Taker::LoneFirstEnqueue,
        Taker::ReadsEverySlotMap,
        Taker::RedialsAtConnect,
        Taker::RetriesTryagain,
        Taker::SentinelExtras,
        Taker::Permissive,
    ];

    /// The reference's [`Permits`] this double switches on.
    #[cfg(feature = "doubles")]
    pub fn permits(self) -> Permits {
        let mut p = Permits::default();
        match self {
            Self::ReconnectReadsFirst => p.reconnect_reads_first = true,
            Self::HmgetPayloads => p.hmget = true,
            Self::Resp3Hello => p.resp3 = true,
            Self::GreetsEachConnection => p.greet = true,
            Self::PingsEveryVerb => p.ping_every_verb = true,
            Self::ShortestReadTimeout => p.short_timeout = true,
            Self::WritePerCommand => p.write_per_command = true,
            Self::EagerNodeConnections => p.eager_nodes = true,
            Self::LoneFirstEnqueue => p.lone_first = true,
            Self::ReadsEverySlotMap => p.every_slot_map = true,
            Self::RedialsAtConnect => p.redial_at_connect = true,
            Self::RetriesTryagain => p.retry_tryagain = true,
            Self::SentinelExtras => p.sentinel_extras = true,
            Self::Permissive => p = Permits::ALL,
        }
        p
    }

    /// A fresh, unconnected instance over `bundle`.
    #[cfg(feature = "doubles")]
    pub fn make(self, bundle: &Bundle) -> Box<dyn Connector + Send> {
        Box::new(Reference::new(bundle).with_permits(self.permits()))
    }

    /// A factory of this double.
    #[cfg(feature = "doubles")]
    pub fn factory(self, bundle: &Arc<Bundle>) -> Box<dyn ConnectorFactory> {
        let bundle = bundle.clone();
        Box::new(move || -> Result<Box<dyn Connector + Send>, HarnessError> {
            Ok(self.make(&bundle))
        })
    }
}
