//! A session's link to the engine: one connection to a single engine, or the redis crate's
//! cluster client on a Valkey Cluster (SPEC §8). Part of the seam: the raw client is allowed here
//! by the `#[expect]` on the parent module.
//!
//! The cluster client runs with `retries(0)`: its own retry loop re-sends a command after a
//! connection error or a timeout (`RetryMethod::Reconnect`/`RetryImmediately` in its
//! `request`), which may run a script twice (R4.16), and the same count bounds its redirects.
//! So redirects are followed here instead, where a `MOVED` or `ASK` (the command did not run,
//! R8.1) is the only reply that leads to a re-send.
//!
//! Its pipelines cannot serve a batch either: they turn one error reply anywhere into an error
//! for the whole pipeline (`extract_error_vec`), so a `NOSCRIPT` or `MOVED` in the middle leaves
//! no way to know which calls ran. Pipelines therefore go on a plain connection per node, to the
//! node the slot map (read from the cluster client with `CLUSTER SLOTS`) names for their slot.

mod dial;
mod pipes;
mod sentinel;

pub(super) use dial::Dial;
pub use sentinel::SentinelQuirks;

use std::collections::HashMap;
use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterConnection};

use crate::engine::admin::shards::{self, SlotMap};
use crate::engine::topology::Role;
use crate::engine::topology::shards::{ShardNode, parse_shards};
use crate::protocol::url::EngineUrl;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ConnectionLike, ErrorKind as RedisKind, RedisResult, ServerErrorKind, Value};

/// How many redirects one command may follow before it fails (a slot migrating back and forth).
const MAX_REDIRECTS: usize = 5;

/// One session's connection(s).
pub(super) enum Link {
    One(redis::Connection),
    Cluster(Box<Cluster>),
    /// The primary of a Sentinel deployment (SPEC §11).
    Sentinel(Box<sentinel::Primary>),
}

/// A session's cluster client and its per-node pipeline connections.
pub(super) struct Cluster {
    client: ClusterClient,
    con: ClusterConnection,
    /// The seed node's host and port (a double loads scripts there only).
    seed: (String, u16),
    /// The seed url: a node's url is this one with the node's address.
    url: String,
    /// How the session dials (its CA, for a node's own connections).
    dial: Dial,
    timeout: Duration,
    /// Each primary's port, slot ranges and replicas, from `CLUSTER SLOTS` (or `SHARDS`).
    slots: SlotMap,
    /// Which reply the slot map is read from, and which of its hosts a pipeline dials.
    map_from: MapFrom,
    /// The host each node's pipeline dials, by port, where the slot map names one; else the
    /// seed's host.
    hosts: HashMap<u16, String>,
    /// The plain connection to each node a pipeline went to, by port.
    pipes: HashMap<u16, redis::Connection>,
    /// A `MOVED` was followed: the slot map is stale; the next call reconnects first.
    stale: bool,
    /// Redirects are followed (always, except in a double).
    follow: bool,
    /// A failed pipeline is sent again whole on a new connection (never, except in a double).
    resend_pipelines: bool,
    /// How an `ASK` is answered (by `ASKING` and the call there, except in a double).
    ask: Ask,
    /// How many redirects one call follows ([`MAX_REDIRECTS`], except in a double).
    redirects: usize,
    /// The node a followed redirect sent the last command to: a `NOSCRIPT` came from there, so
    /// the script is loaded there (R8.2), not where the slot map says the slot lives.
    answered_by: Option<(String, u16)>,
    /// Load on the node the slot map names even after a redirect (only a double does this).
    load_by_slot: bool,
    /// A lost connection (or a timeout) makes the slot map stale (always, except in a double).
    refresh_on_loss: bool,
    /// `READONLY` makes the slot map stale (always, except in a double).
    refresh_on_readonly: bool,
    /// A followed `MOVED` makes the slot map stale (always, except in a double).
    refresh_on_moved: bool,
    /// A redirected call goes on a connection of its own in database 0 (only a double does
    /// this), by node.
    redirect_db0: Option<HashMap<(String, u16), redis::Connection>>,
    /// Replacement connections are opened in database 0 (only a double does this).
    reconnect_db0: bool,
    /// A redirect's empty host is dialled as it is (only a double does this).
    empty_host_kept: bool,
}

/// How a cluster session answers `ASK` (SPEC R8.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ask {
    /// `ASKING`, then the call, on the named node.
    #[default]
    Follow,
    /// The `ASK` is the call's error (a double).
    Ignore,
    /// The call on the named node without `ASKING` first (a double): it answers `MOVED` back.
    WithoutAsking,
}

/// Which reply a cluster session reads its slot map from (SPEC P4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapFrom {
    /// `CLUSTER SLOTS`; pipelines dial the seed's host.
    #[default]
    Slots,
    /// `CLUSTER SHARDS`; pipelines dial each node's `endpoint` (a permission's path).
    Shards,
    /// `CLUSTER SHARDS`; pipelines dial each node's `ip` (a double: breaks R10.4 on TLS).
    ShardsIp,
}

/// Where a redirect sends a command.
enum Redirect {
    Moved(String, u16),
    Ask(String, u16),
}

impl Cluster {
    /// The redirect with its host named (SPEC R8.13): an empty host is the host of the node
    /// that answered, the one the last redirect named or else the seed's (this session's nodes
    /// are all at hosts the seed's slot map gave, and the harness's at the seed's host).
    fn named(&self, r: Redirect) -> Redirect {
        let host = |h: String| match (h.is_empty() && !self.empty_host_kept, &self.answered_by) {
            (false, _) => h,
            (true, Some((by, _))) => by.clone(),
            (true, None) => self.seed.0.clone(),
        };
        match r {
            Redirect::Moved(h, p) => Redirect::Moved(host(h), p),
            Redirect::Ask(h, p) => Redirect::Ask(host(h), p),
        }
    }
}

fn redirect_of(e: &redis::RedisError) -> Option<Redirect> {
    let (addr, _) = e.redirect_node()?;
    let (host, port) = addr.rsplit_once(':')?;
    let port = port.parse().ok()?;
    match e.kind() {
        RedisKind::Server(ServerErrorKind::Moved) => Some(Redirect::Moved(host.to_string(), port)),
        RedisKind::Server(ServerErrorKind::Ask) => Some(Redirect::Ask(host.to_string(), port)),
        _ => None,
    }
}

/// True when `e` says the connection was lost (or never made, or timed out): the node may be
/// gone, so what the session knows of where to send calls may be wrong (R8.11, R11.3).
fn lost(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}

fn by_address(host: &str, port: u16) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
        host: host.to_string(),
        port,
    })
}

impl Link {
    /// Opens a single-engine connection or, with `cluster`, the cluster client (it reads the slot
    /// map from the seed `url` and uses its password on every node).
    pub(super) fn open(dial: &Dial, timeout: Duration) -> RedisResult<Self> {
        let url = dial.url.as_str();
        if let Some(p) = sentinel::Primary::open(dial, timeout) {
            return Ok(Self::Sentinel(Box::new(p?)));
        }
        if !dial.cluster {
            return Ok(Self::One(dial.connection(url, timeout)?));
        }
        if dial.seed_only && dial.ca.is_some() {
            // The double's seed check: one verified connection, closed at once.
            drop(dial.client(url)?.get_connection_with_timeout(timeout)?);
        }
        let client = dial.cluster_client(vec![url.to_string()], timeout)?;
        let mut con = client.get_connection()?;
        let (slots, hosts) = read_map(&mut con, MapFrom::Slots, url)?;
        let info = redis::IntoConnectionInfo::into_connection_info(url)?;
        let seed = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port)
            | redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
            other => {
                return Err(redis::RedisError::from((
                    RedisKind::InvalidClientConfig,
                    "a cluster seed is a tcp address",
                    format!("{other:?}"),
                )));
            }
        };
        Ok(Self::Cluster(Box::new(Cluster {
            client,
            con,
            seed,
            url: url.to_string(),
            dial: dial.clone(),
            timeout,
            slots,
            map_from: MapFrom::Slots,
            hosts,
            pipes: HashMap::new(),
            stale: false,
            follow: true,
            resend_pipelines: false,
            ask: Ask::Follow,
            redirects: MAX_REDIRECTS,
            answered_by: None,
            load_by_slot: false,
            refresh_on_loss: true,
            refresh_on_readonly: true,
            refresh_on_moved: true,
            redirect_db0: None,
            reconnect_db0: false,
            empty_host_kept: false,
        })))
    }

    /// The cluster departures a double asks for (redirects not followed, pipelines re-sent,
    /// `ASK` answered otherwise, scripts loaded by the slot map); none on one engine.
    pub(super) fn apply(&mut self, q: &super::Quirks) {
        if let Self::Cluster(c) = self {
            c.follow = !q.no_redirects;
            c.resend_pipelines = q.resend_pipelines;
            c.ask = q.ask;
            c.redirects = if q.one_redirect { 1 } else { MAX_REDIRECTS };
            c.load_by_slot = q.load_by_slot;
            c.refresh_on_loss = !q.stale_slot_map;
            c.refresh_on_readonly = !q.readonly_final;
            c.refresh_on_moved = !q.moved_no_refresh;
            c.redirect_db0 = q.redirect_without_select.then(HashMap::new);
            c.reconnect_db0 = q.reconnect_without_select;
            c.empty_host_kept = q.empty_host_dialed;
        }
    }

    /// After a command failed (SPEC R8.11): a lost connection, a timeout, `READONLY` (the node
    /// was demoted) or `CLUSTERDOWN` says the slot map may be wrong, so the next call reads it
    /// again, on fresh connections, and the session reads the fence first (R8.9). The failed
    /// call itself is never sent again (R4.17).
    pub(super) fn after_error(&mut self, e: &redis::RedisError) {
        if let Self::Sentinel(p) = self {
            p.after_error(e);
        }
        if let Self::Cluster(c) = self {
            let lost = lost(e) || e.kind() == RedisKind::Server(ServerErrorKind::ClusterDown);
            let readonly = e.kind() == RedisKind::Server(ServerErrorKind::ReadOnly);
            if (lost && c.refresh_on_loss) || (readonly && c.refresh_on_readonly) {
                c.stale = true;
            }
        }
    }

    /// True on a cluster.
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// True when a redirect was followed since the slot map was read, or the primary behind
    /// Sentinel may have moved (R11.3).
    pub(super) fn is_stale(&self) -> bool {
        match self {
            Self::Cluster(c) => c.stale,
            Self::Sentinel(p) => p.stale,
            Self::One(_) => false,
        }
    }

    /// Reads the slot map again before the next call (a pipeline met a redirect).
    pub(super) fn mark_stale(&mut self) {
        if let Self::Cluster(c) = self
            && c.follow
        {
            c.stale = true;
        }
    }

    /// A fresh cluster connection (a fresh slot map); the caller reads the fence on it (R3.1).
    /// Every node of the last slot map is a seed besides the url's: the seed node may be the one
    /// that died (R8.11).
    pub(super) fn reconnect(&mut self) -> RedisResult<()> {
        if let Self::Sentinel(p) = self {
            return p.reconnect();
        }
        if let Self::Cluster(c) = self {
            if c.reconnect_db0 {
                c.url = parse_url(&c.url)?.with_db(Some(0)).to_string();
            }
            let mut seeds = vec![c.url.clone()];
            for (primary, _, replicas) in &c.slots {
                for port in std::iter::once(primary).chain(replicas) {
                    seeds.push(c.node_url(*port)?);
                }
            }
            seeds.dedup();
            // The old connections go first: a node's dead one must not be reused.
            c.pipes.clear();
            c.client = c.dial.cluster_client(seeds, c.timeout)?;
            c.con = c.client.get_connection()?;
            (c.slots, c.hosts) = read_map(&mut c.con, c.map_from, &c.url)?;
            c.stale = false;
        }
        Ok(())
    }

    fn con(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Self::One(c) => c,
            Self::Sentinel(p) => &mut p.con,
            Self::Cluster(c) => &mut c.con,
        }
    }

    /// One command, routed by its key on a cluster, following redirects; server errors as `Err`.
    pub(super) fn send(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        if let Self::Cluster(c) = self {
            c.answered_by = None;
        }
        let first = self.con().req_command(cmd).and_then(Value::extract_error);
        let r = self.follow(cmd, first);
        if let Err(e) = &r {
            self.after_error(e);
        }
        r
    }

    /// Follows the redirects `reply` names (a cluster only), at most [`MAX_REDIRECTS`].
    fn follow(&mut self, cmd: &Cmd, mut reply: RedisResult<Value>) -> RedisResult<Value> {
        for hop in 0..MAX_REDIRECTS {
            let Self::Cluster(c) = self else {
                return reply;
            };
            if hop == c.redirects {
                return reply;
            }
            if !c.follow {
                return reply;
            }
            let redirect = match &reply {
                Err(e) => redirect_of(e).map(|r| c.named(r)),
                Ok(_) => None,
            };
            if let (Some(Redirect::Moved(host, port) | Redirect::Ask(host, port)), true) =
                (&redirect, c.redirect_db0.is_some())
            {
                let asking = matches!(redirect, Some(Redirect::Ask(..)));
                c.stale |= !asking && c.refresh_on_moved;
                c.answered_by = Some((host.clone(), *port));
                reply = c.send_in_db0(cmd, host, *port, asking);
                continue;
            }
            let con = &mut c.con;
            reply = match redirect {
                None => return reply,
                Some(Redirect::Ask(..)) if c.ask == Ask::Ignore => return reply,
                Some(Redirect::Moved(host, port)) => {
                    c.stale |= c.refresh_on_moved;
                    c.answered_by = Some((host.clone(), port));
                    con.route_command(cmd, by_address(&host, port))
                }
                Some(Redirect::Ask(host, port)) => {
                    c.answered_by = Some((host.clone(), port));
                    let asking = if c.ask == Ask::WithoutAsking {
                        Ok(Value::Okay)
                    } else {
                        con.route_command(&redis::cmd("ASKING"), by_address(&host, port))
                    };
                    asking.and_then(|_| con.route_command(cmd, by_address(&host, port)))
                }
            }
            .and_then(Value::extract_error);
        }
        reply
    }

    /// `PING` on the node that serves `key` (a cluster; only a double does this): a dead
    /// connection there is dropped, and the cluster client opens a new one on the next command.
    pub(super) fn ping_for(&mut self, key: &str) -> RedisResult<Value> {
        match self {
            Self::One(c) => c.req_command(&redis::cmd("PING")),
            Self::Sentinel(p) => p.con.req_command(&redis::cmd("PING")),
            Self::Cluster(c) => c.con.route_command(
                &redis::cmd("PING"),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
                    key,
                    SlotAddr::Master,
                ))),
            ),
        }
    }

    /// `SCRIPT LOAD` on the node that said `NOSCRIPT` (R8.2): the one a followed redirect sent
    /// the call to, else the node that serves `key`; or on the one engine.
    pub(super) fn load_for(&mut self, key: &str, source: &[u8]) -> RedisResult<Value> {
        let load = redis::cmd("SCRIPT").arg("LOAD").arg(source).to_owned();
        let first = match self {
            Self::One(c) => return c.req_command(&load).and_then(Value::extract_error),
            Self::Sentinel(p) => {
                let r = p.con.req_command(&load).and_then(Value::extract_error);
                if let Err(e) = &r {
                    p.after_error(e);
                }
                return r;
            }
            Self::Cluster(c) if !c.load_by_slot && c.answered_by.is_some() => {
                let (host, port) = c.answered_by.clone().expect("checked");
                return c
                    .con
                    .route_command(&load, by_address(&host, port))
                    .and_then(Value::extract_error);
            }
            Self::Cluster(c) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key, SlotAddr::Master),
                ));
                c.con
                    .route_command(&load, route)
                    .and_then(Value::extract_error)
            }
        };
        self.follow(&load, first)
    }

    /// `SCRIPT LOAD` on the seed node whatever the call's node (only a double does this).
    pub(super) fn load_on_seed(&mut self, source: &[u8]) -> RedisResult<Value> {
        let load = redis::cmd("SCRIPT").arg("LOAD").arg(source).to_owned();
        match self {
            Self::One(c) => c.req_command(&load).and_then(Value::extract_error),
            Self::Sentinel(p) => p.con.req_command(&load).and_then(Value::extract_error),
            Self::Cluster(c) => c
                .con
                .route_command(&load, by_address(&c.seed.0, c.seed.1))
                .and_then(Value::extract_error),
        }
    }
}

/// The primaries and their slots, read through the cluster client from `from`'s reply, and the
/// host of each where the reply names one a client dials (`seed` says whether that is TLS).
fn read_map(
    con: &mut ClusterConnection,
    from: MapFrom,
    seed: &str,
) -> RedisResult<(SlotMap, HashMap<u16, String>)> {
    let sub = if from == MapFrom::Slots {
        "SLOTS"
    } else {
        "SHARDS"
    };
    let v = con.route_command(
        &redis::cmd("CLUSTER").arg(sub).to_owned(),
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
    )?;
    let bad = |e| redis::RedisError::from((RedisKind::Client, "bad CLUSTER slot map reply", e));
    if from == MapFrom::Slots {
        return Ok((
            shards::parse_cluster_slots(&v).map_err(bad)?,
            HashMap::new(),
        ));
    }
    let tls = parse_url(seed)?.scheme == crate::protocol::url::Scheme::Rediss;
    let (mut map, mut hosts): (SlotMap, _) = (Vec::new(), HashMap::new());
    for s in parse_shards(&v).map_err(bad)? {
        let Some(p) = s.primary().filter(|_| !s.ranges.is_empty()) else {
            continue;
        };
        let port_of = |n: &ShardNode| {
            n.client_port(tls)
                .ok_or_else(|| bad(format!("a node without its port: {n:?}")))
        };
        let replicas = s.nodes.iter().filter(|n| n.role == Role::Replica);
        let replicas = replicas.map(port_of).collect::<RedisResult<Vec<u16>>>()?;
        let host = match from {
            MapFrom::ShardsIp => Some(p.ip.as_str()),
            _ => p.host(),
        };
        if let Some(h) = host {
            hosts.insert(port_of(p)?, h.to_string());
        }
        map.push((port_of(p)?, s.ranges.clone(), replicas));
    }
    map.sort_by_key(|(_, ranges, _)| ranges[0]);
    Ok((map, hosts))
}

fn parse_url(url: &str) -> RedisResult<EngineUrl> {
    EngineUrl::parse(url).map_err(|e| {
        redis::RedisError::from((
            RedisKind::InvalidClientConfig,
            "bad seed url",
            e.to_string(),
        ))
    })
}

impl Cluster {
    /// The seed url with the node's host (where the slot map names one) and `port`, naming its
    /// database (0 when it names none).
    /// A double's: `cmd` (after `ASKING` when `asking`) on its own connection to `host:port`,
    /// opened in database 0 whatever the url names.
    fn send_in_db0(
        &mut self,
        cmd: &Cmd,
        host: &str,
        port: u16,
        asking: bool,
    ) -> RedisResult<Value> {
        let key = (host.to_string(), port);
        let cons = self.redirect_db0.get_or_insert_with(HashMap::new);
        if !cons.contains_key(&key) {
            let mut u = parse_url(&self.url)?.with_port(port).with_db(Some(0));
            u.host = host.to_string();
            cons.insert(
                key.clone(),
                self.dial.connection(&u.to_string(), self.timeout)?,
            );
        }
        let con = cons.get_mut(&key).expect("inserted above");
        if asking {
            con.req_command(&redis::cmd("ASKING"))?.extract_error()?;
        }
        con.req_command(cmd).and_then(Value::extract_error)
    }

    fn node_url(&self, port: u16) -> RedisResult<String> {
        let u = parse_url(&self.url)?;
        // A double's: the database on the seed's connections alone.
        let db = if self.dial.select_seed_only && port != self.seed.1 {
            0
        } else {
            u.db_or_zero()
        };
        let mut n = u.with_port(port).with_db(Some(db));
        if let Some(h) = self.hosts.get(&port) {
            n.host = h.clone();
        }
        Ok(n.to_string())
    }

    /// Reads the slot map from `from` from now on (a permission's path, or a double's).
    pub(super) fn read_map_from(&mut self, from: MapFrom) -> RedisResult<()> {
        self.map_from = from;
        (self.slots, self.hosts) = read_map(&mut self.con, from, &self.url)?;
        self.pipes.clear();
        Ok(())
    }
}
