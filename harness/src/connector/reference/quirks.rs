//! The reference connector's departures from SPEC, each a double's (`crate::doubles`).

use super::Ask;

/// Departures from SPEC (§8, and R4.11's probe) that only a double turns on (`crate::doubles`),
/// the way `root` is swapped: the production connector has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quirks {
    /// On `NOSCRIPT`, load on the seed node instead of the node that said it (breaks R8.2).
    pub load_on_seed: bool,
    /// Send a `batch` over several queues as one pipeline to one node (breaks R8.3).
    pub ungrouped_batches: bool,
    /// Never follow `MOVED`/`ASK` nor read the slot map again (breaks R8.1, R8.4).
    pub no_redirects: bool,
    /// Before each call, `PING`; when the engine closed the connection, open a new one and send
    /// the call on it without reading the fence, as redis-py's pool and redis-rb's
    /// `ensure_connected` do (breaks R3.1; one engine only).
    pub silent_reconnect: bool,
    /// On a cluster, when a node's pipeline fails before every reply was read, open a new
    /// connection to that node and send the whole pipeline again, as redis-py's `ClusterPipeline`
    /// does whatever `retry` says (breaks R4.16; a cluster only).
    pub resend_pipelines: bool,
    /// How `ASK` is answered during a slot migration (anything but `Follow` breaks R8.6).
    pub ask: Ask,
    /// One redirect per call: a redirect from the node a `MOVED` named is the call's error
    /// (breaks R8.12: a slot that moved since the map was read and is moving again).
    pub one_redirect: bool,
    /// On a cluster, the slot map is read from `CLUSTER SHARDS` and each node's pipeline dials
    /// its `ip`, not its `endpoint`, as redis-cluster-client 0.16 did (#515): on TLS the
    /// certificate names the host, never the address (breaks R10.4).
    pub shards_ip: bool,
    /// On `NOSCRIPT` after a redirect, load where the slot map says, not there (breaks R8.8).
    pub load_by_slot: bool,
    /// On a cluster, before each script call, `PING` the key's node; a dead connection there is
    /// replaced by the cluster client without a fence read, as redis-py's cluster pool does
    /// (breaks R3.5 on a cluster).
    pub silent_node_reconnect: bool,
    /// The probe's commands are `INCRBY key 1`, as redis-py's `incr()` sends them: the same
    /// replies, not the probe's `INCR` (breaks R4.11).
    pub incrby_probe: bool,
    /// In a `batch`, a `NOSCRIPT` reply counts as an enqueue that landed, as with Debian's eredis
    /// 1.2, whose parser returns an error reply split across two socket reads as a value: the
    /// call is never sent again (breaks R4.12).
    pub noscript_lands: bool,
    /// After a verb failed with kind `engine`, the session's next verb dials a new connection and
    /// sends on it without reading the fence, as redigo's `Pool.Get` does (breaks R3.5; one
    /// engine only).
    pub redial_unfenced: bool,
    /// `disconnect` forgets the session but keeps its connection open (breaks R5.13).
    pub leak_on_disconnect: bool,
    /// `connect` of a connected session keeps the old connection open (breaks R5.13).
    pub leak_on_reconnect: bool,
    /// On `NOSCRIPT`, `EVAL` of the script's source instead of `SCRIPT LOAD` and `EVALSHA`, as
    /// redigo's `Script.Do` does (breaks R4.9: never `EVAL`).
    pub eval_on_noscript: bool,
    /// The six scripts are loaded once, at connect, after the fence; a later `NOSCRIPT` (after
    /// a `SCRIPT FLUSH`) is the call's error, in a batch too (breaks R4.9: the caller sees no
    /// error after a flush).
    pub preload_only: bool,
    /// A read timeout of [`super::SHORT_TIMEOUT`]; when a script call times out, the session
    /// opens a new connection (the fence read on it) and leaves the old one open, abandoned
    /// (breaks R5.13; one engine only).
    pub abandon_on_timeout: bool,
    /// On `rediss://`, no certificate is verified at all: redis-rs's `#insecure` (breaks R10.3
    /// and R10.4).
    pub tls_accept_any: bool,
    /// On `rediss://`, the chain is verified and the name is not: redis-rs's
    /// `set_danger_accept_invalid_hostnames` (breaks R10.4).
    pub tls_skip_names: bool,
    /// On a `rediss://` cluster, the seed alone is verified (a connection of its own at
    /// `connect`); the cluster client checks no node's certificate (breaks R10.3 and R10.4 on
    /// the nodes it discovers: a client that gives its TLS options to the seed only).
    pub tls_seed_only: bool,
    /// On a cluster, a lost connection leaves the slot map as it was: the session keeps the
    /// dead node's connection and never reads the map again (breaks R8.11).
    pub stale_slot_map: bool,
    /// On a cluster, a followed `MOVED` leaves the slot map as it was: the call goes to the node
    /// it names, and every later call on the slot meets `MOVED` again (breaks R8.11).
    pub moved_no_refresh: bool,
    /// On a cluster, a call that follows `MOVED` or `ASK` goes on a connection of its own to
    /// the node named, opened without `SELECT` (breaks R8.5: a redirect names no database).
    pub redirect_without_select: bool,
    /// On a cluster, the url's database is selected on the seed's connections only: the
    /// cluster client's connections to every node work in database 0 (breaks R8.5: redis-py
    /// gives its cluster nodes database 0).
    pub select_seed_only: bool,
    /// On a cluster, the connections that replace failed ones are opened without `SELECT`
    /// (breaks R8.5: a replacement forgets the url's database).
    pub reconnect_without_select: bool,
    /// On a cluster, a redirect that names no host (`MOVED 12 :7001`) is dialled at the empty
    /// host, as redis-rs's `ByAddress` route and redis-py's `AskError` take it (breaks R8.13).
    pub empty_host_dialed: bool,
    /// On a cluster, `READONLY` is the call's final answer: the slot map is not read again and
    /// the connection that said it stays (breaks R8.11).
    pub readonly_final: bool,
    /// A `NOSCRIPT` reply is a miss only when its whole text is Valkey's
    /// ([`VALKEY_NOSCRIPT_TEXT`]); any other wording (Redis's, or G3's rewritten one) is the
    /// call's error, in a batch too (breaks R4.9: match the prefix only).
    pub noscript_exact_text: bool,
    /// Behind Sentinel, the departures of [`super::link::SentinelQuirks`] (SPEC §11).
    pub sentinel: super::link::SentinelQuirks,
}

/// The text after the code of Valkey's `NOSCRIPT` reply: `shared.noscripterr` in Valkey 9.1's
/// `src/server.c` is `-NOSCRIPT No matching script.`; Redis 7.0.15's and 8.0's add
/// ` Please use EVAL.`. [`Quirks::noscript_exact_text`] knows a miss by it.
pub const VALKEY_NOSCRIPT_TEXT: &str = "No matching script.";

impl Quirks {
    /// Whether a `NOSCRIPT` reply whose text after the code is `detail` is taken for a miss:
    /// always, as R4.9 asks, except under [`Quirks::noscript_exact_text`].
    pub(super) fn takes_miss(&self, detail: Option<&str>) -> bool {
        !self.noscript_exact_text || detail == Some(VALKEY_NOSCRIPT_TEXT)
    }
}
