//! The reference connector: EchoMQ's L3 in Rust, and the harness's **sole raw-Redis seam** for
//! connectors. The raw client (`redis::Client`, `redis::cmd`, `redis::pipe`) is banned by clippy
//! everywhere else (`clippy.toml`); this module owns it, the key schema and the dispatch.
#![expect(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the one connector module allowed to hold the raw client: every EchoMQ command a \
              connector sends is built here, so the command discipline lives in one place"
)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod dispatch;
mod fence;
mod link;
#[cfg(feature = "doubles")]
mod lowering;
mod permits;
mod pipelined;
mod quirks;
mod resp;
mod scripts;

pub use link::Ask;
use link::{Dial, Link, MapFrom};
pub use permits::Permits;
pub use quirks::Quirks;
use redis::{ErrorKind as RedisKind, ServerErrorKind, Value};

use crate::connector::args::validate;
use crate::connector::{Connector, Identity, Reply, Request};
use crate::error::{ConnectorError, ErrorKind};
use crate::protocol::bundle::{Bundle, SCRIPT_ORDER};
use crate::protocol::grammar::{FENCE_KEY, job_root, key};

/// What the connector knows of one script: name, SHA it sends, source it loads on a miss.
struct Loaded {
    sha: String,
    source: Vec<u8>,
}

/// The in-process reference connector.
pub struct Reference {
    scripts: HashMap<&'static str, Loaded>,
    bundle_version: String,
    protocol: u32,
    digest: String,
    sessions: HashMap<String, Link>,
    /// Each session's dial, for [`Quirks::silent_reconnect`] and [`Quirks::redial_unfenced`] only.
    urls: HashMap<String, Dial>,
    /// Sessions whose last verb failed with kind `engine`, for [`Quirks::redial_unfenced`] and
    /// [`Permits::reconnect_reads_first`] only.
    failed: std::collections::HashSet<String>,
    /// Sessions on a connection opened by [`Permits::reconnect_reads_first`] that has not read
    /// the fence yet: it does before the first script.
    unfenced: std::collections::HashSet<String>,
    /// Connections kept open after their session let go of them, for the leak doubles only.
    leaked: Vec<Link>,
    /// Builds a queue's job root (`ARGV[1]`): always [`job_root`] except in a double.
    root: fn(&str) -> String,
    /// What a cluster double does differently; always the default except in a double.
    quirks: Quirks,
    /// The permitted paths a permission double takes; none in the production reference.
    permits: Permits,
    log: Vec<String>,
}

/// Network timeout for connect and for each reply: long enough for a 100 000-command batch.
const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// The read timeout of [`Permits::short_timeout`]: the shortest SPEC allows (P4.11).
pub(crate) const PERMITTED_SHORTEST: Duration = Duration::from_secs(3);
/// The read timeout of [`Quirks::abandon_on_timeout`]: short, but past G5's 2 s held window (a
/// batch's first pipeline waits that long for its replies there) and under G1's 3.5 s held reply.
pub(crate) const SHORT_TIMEOUT: Duration = Duration::from_millis(2500);

fn engine_err(e: redis::RedisError) -> ConnectorError {
    ConnectorError::engine(e.to_string())
}

/// A `NOSCRIPT` reply taken for a miss: its code alone (R4.9), unless a double's quirk asks
/// for more ([`Quirks::takes_miss`]).
fn is_noscript(e: &redis::RedisError, quirks: Quirks) -> bool {
    e.kind() == RedisKind::Server(ServerErrorKind::NoScript) && quirks.takes_miss(e.detail())
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

fn shape(what: &str, v: &Value) -> ConnectorError {
    ConnectorError::internal(format!("unexpected reply to {what}: {v:?}"))
}

impl Reference {
    /// A reference connector dispatching `bundle`'s scripts (their bytes as loaded: a double
    /// hands it a patched bundle to send foreign scripts).
    pub fn new(bundle: &Bundle) -> Self {
        let scripts = SCRIPT_ORDER
            .iter()
            .map(|name| {
                let source = bundle.script(name).source.clone();
                let sha = crate::protocol::bundle::sha1_hex(&source);
                (*name, Loaded { sha, source })
            })
            .collect();
        Self {
            scripts,
            bundle_version: bundle.manifest.bundle.clone(),
            protocol: bundle.manifest.protocol,
            digest: bundle.manifest.digest.clone(),
            sessions: HashMap::new(),
            urls: HashMap::new(),
            failed: Default::default(),
            unfenced: Default::default(),
            leaked: Vec::new(),
            root: job_root,
            quirks: Quirks::default(),
            permits: Permits::default(),
            log: Vec::new(),
        }
    }

    /// Shared-bundle convenience.
    pub fn boxed(bundle: &Arc<Bundle>) -> Box<dyn Connector + Send> {
        Box::new(Self::new(bundle))
    }

    fn session(&mut self, name: &str) -> Result<&mut Link, ConnectorError> {
        self.sessions
            .get_mut(name)
            .ok_or_else(|| ConnectorError::invalid(format!("unknown session {name:?}")))
    }

    fn root(&self, q: &str) -> String {
        (self.root)(q)
    }

    /// Opens a link as `dial` says, with the connector's timeouts.
    fn open(dial: &Dial) -> Result<Link, ConnectorError> {
        Self::open_timed(dial, IO_TIMEOUT)
    }

    /// [`Self::open`] with a timeout of `io`.
    fn open_timed(dial: &Dial, io: Duration) -> Result<Link, ConnectorError> {
        Link::open(dial, io).map_err(|e| match e.kind() {
            RedisKind::InvalidClientConfig => {
                ConnectorError::invalid(format!("url {:?}: {e}", dial.url))
            }
            _ => engine_err(e),
        })
    }

    /// How `connect` dials: its url, and on `rediss://` the CAs of `ca_file`, read now: a file
    /// that cannot be read or holds no certificate is `invalid`, nothing sent (SPEC R10.1).
    fn dial(&self, target: &crate::engine::Target) -> Result<Dial, ConnectorError> {
        let crate::engine::Target {
            url,
            cluster,
            ca_file,
            sentinel,
        } = target;
        let ca = match ca_file {
            None => None,
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    ConnectorError::invalid(format!("ca_file {path:?} cannot be read: {e}"))
                })?;
                if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                    return Err(ConnectorError::invalid(format!(
                        "ca_file {path:?} holds no PEM certificate"
                    )));
                }
                Some(pem)
            }
        };
        Ok(Dial {
            url: url.to_string(),
            cluster: *cluster,
            ca,
            sentinel: sentinel.clone(),
            sentinel_quirks: self.quirks.sentinel,
            accept_any: self.quirks.tls_accept_any,
            skip_names: self.quirks.tls_skip_names,
            seed_only: self.quirks.tls_seed_only,
            select_seed_only: self.quirks.select_seed_only,
            permits: self.permits,
        })
    }

    /// SPEC §3: every connect reads the fence before its first verb (on a cluster, on the
    /// fence's own node: the cluster client routes `emq:fence` by its slot, R8.1).
    fn open_session(
        &mut self,
        session: &str,
        target: &crate::engine::Target,
    ) -> Result<(), ConnectorError> {
        let dial = self.dial(target)?;
        let mut link = match Self::open_timed(&dial, self.io_timeout()) {
            // P3.4: a connection closed before the fence read is dialled once more.
            Err(e) if self.permits.redial_at_connect && e.kind == ErrorKind::Engine => {
                Self::open_timed(&dial, self.io_timeout())?
            }
            other => other?,
        };
        link.apply(&self.quirks);
        self.check_fence(&mut link)?;
        if self.permits.eager_nodes {
            link.open_every_node().map_err(engine_err)?;
        }
        let from = match (self.quirks.shards_ip, self.permits.every_slot_map) {
            (true, _) => Some(MapFrom::ShardsIp),
            (false, true) => Some(MapFrom::Shards),
            (false, false) => None,
        };
        if let Some(from) = from {
            link.read_other_slot_maps(from).map_err(engine_err)?;
        }
        if self.quirks.preload_only {
            for name in SCRIPT_ORDER {
                Self::load(&mut link, FENCE_KEY, &self.scripts[name], self.quirks)?;
            }
        }
        if let Some(old) = self.sessions.insert(session.to_string(), link)
            && self.quirks.leak_on_reconnect
        {
            self.leaked.push(old);
        }
        if self.quirks.silent_reconnect
            || self.quirks.redial_unfenced
            || self.quirks.abandon_on_timeout
            || self.permits.reconnect_reads_first
            || self.permits.short_timeout
        {
            self.urls.insert(session.to_string(), dial);
        }
        self.failed.remove(session);
        self.unfenced.remove(session);
        Ok(())
    }

    /// The session's link, reconnected first (the fence read again, R3.1) when a followed
    /// `MOVED` left its slot map stale.
    fn live(&mut self, session: &str) -> Result<&mut Link, ConnectorError> {
        let mut link = self
            .sessions
            .remove(session)
            .ok_or_else(|| ConnectorError::invalid(format!("unknown session {session:?}")))?;
        if self.quirks.silent_reconnect
            && !link.is_cluster()
            && link.send(&redis::cmd("PING")).is_err()
            && let Some(dial) = self.urls.get(session)
            && let Ok(new) = Self::open(dial)
        {
            link = new;
        }
        if self.quirks.redial_unfenced
            && !link.is_cluster()
            && self.failed.remove(session)
            && let Some(dial) = self.urls.get(session)
            && let Ok(new) = Self::open(dial)
        {
            link = new;
        }
        if self.permits.reconnect_reads_first
            && !link.is_cluster()
            && self.failed.remove(session)
            && let Some(dial) = self.urls.get(session)
            && let Ok(new) = Self::open_timed(dial, self.io_timeout())
        {
            // The old connection is closed as it is dropped (R5.13).
            link = new;
            self.unfenced.insert(session.to_string());
        }

        let fresh = if link.is_stale() {
            link.reconnect()
                .map_err(engine_err)
                .and_then(|()| self.check_fence(&mut link))
        } else {
            Ok(())
        };
        let ping = self.permits.ping_every_verb;
        let link = self.sessions.entry(session.to_string()).or_insert(link);
        fresh?;
        if ping {
            // A pool's health check of the connection it hands out (P4.7).
            link.send(&redis::cmd("PING")).map_err(engine_err)?;
        }
        Ok(link)
    }

    /// After a read timeout: a new fenced connection for `session`. The old one is closed
    /// ([`Permits::short_timeout`], R5.13), or kept open in `leaked`, never closed
    /// ([`Quirks::abandon_on_timeout`]).
    fn abandon(&mut self, session: &str) -> Result<(), ConnectorError> {
        let dial = self.urls.get(session).ok_or_else(|| {
            ConnectorError::internal(format!("no dial kept for session {session:?}"))
        })?;
        let mut fresh = Self::open_timed(dial, self.io_timeout())?;
        fresh.apply(&self.quirks);
        self.check_fence(&mut fresh)?;
        if let Some(old) = self.sessions.insert(session.to_string(), fresh)
            && self.quirks.abandon_on_timeout
        {
            self.leaked.push(old);
        }
        Ok(())
    }

    fn enqueue_keys(q: &str) -> Vec<String> {
        vec![key(q, "pending"), key(q, "delayed"), key(q, "seq")]
    }

    fn dispatch(&mut self, req: &Request) -> Result<Reply, ConnectorError> {
        req.handle(self)
    }

    fn identity(&self) -> Identity {
        Identity {
            name: "echomq-rust-reference".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            language: "rust".into(),
            bundle: self.bundle_version.clone(),
            scripts: self
                .scripts
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.sha.clone()))
                .collect(),
        }
    }
}

impl Connector for Reference {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        validate(request)?;
        let r = self.dispatch(request);
        if (self.quirks.redial_unfenced || self.permits.reconnect_reads_first)
            && let (Err(e), Some(s)) = (&r, request.session())
            && e.kind == crate::error::ErrorKind::Engine
        {
            self.failed.insert(s.to_string());
        }
        r
    }

    fn log_tail(&self) -> String {
        self.log.join("\n")
    }
}
