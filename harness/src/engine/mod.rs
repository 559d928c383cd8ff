//! L0, the engine: a live Valkey the harness boots (container or binary) or is given (url), and
//! removes again however the run ends.

pub mod acl;
pub mod admin;
pub mod binary;
pub mod cleanup;
pub mod cluster;
pub mod container;
pub mod health;
pub mod migration;
pub mod named;
pub mod nodes;
pub mod proxied;
mod ready;
pub mod sentinel;
mod target;
mod tls_boot;
pub mod topology;
mod urls;
pub mod version;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::HarnessError;
use crate::protocol::url::{EngineUrl, Scheme};
pub use admin::Admin;

pub use version::DEFAULT_IMAGE;

/// Databases each booted engine offers, so every case can own one.
pub const DATABASES: u32 = 1024;

/// The server flags every booted engine runs with, binary or container: its users (the admin,
/// the connector's, `default` off: [`acl`]), no persistence, and [`DATABASES`] databases. Where
/// it listens is the caller's (a loopback port for the binary; the container's own 6379).
pub fn server_flags(users: &acl::Users) -> Vec<String> {
    let mut flags = users.server_flags();
    flags.extend(
        [
            "--save",
            "",
            "--appendonly",
            "no",
            "--databases",
            &DATABASES.to_string(),
        ]
        .map(String::from),
    );
    flags
}

#[cfg(test)]
mod flags_tests {
    #[test]
    fn both_engines_share_users_persistence_and_databases() {
        let users = super::acl::Users::random(None);
        let f = super::server_flags(&users);
        assert_eq!(f[..3], ["--user", "default", "off"]);
        assert!(!f.iter().any(|x| x == "--requirepass"));
        assert!(f.windows(2).any(|w| w == ["--save", ""]));
        assert!(f.windows(2).any(|w| w == ["--appendonly", "no"]));
        assert!(f.windows(2).any(|w| w == ["--databases", "1024"]));
    }
}

/// How the user asked for an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineChoice {
    /// url if given, else container if Docker and the image answer, else binary.
    Auto,
    Container,
    Binary,
    Url,
    /// A Valkey Cluster of binary nodes: three primaries, three replicas (SPEC §8).
    Cluster,
    /// A primary and two replicas of binary nodes, watched by three Sentinels (SPEC §11):
    /// `--engine-name valkey-9.1-sentinel`, or `valkey-9.1-tls-sentinel` (every server TLS only).
    Sentinel,
}

/// Everything needed to pick and boot an engine.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub choice: EngineChoice,
    pub url: Option<String>,
    pub image: String,
    pub valkey_server: Option<PathBuf>,
    /// Allow flushing a `url` database that holds keys the harness did not make.
    pub allow_flush: bool,
    /// A TLS engine (SPEC §10): a binary built with TLS, listening on a TLS port only.
    pub tls: bool,
}

/// The defaults, and nothing else: reading the environment is the command line's job (clap's
/// `env`, also behind `cmd::cli::engine_options_from_env`), so a default never depends on where
/// it runs.
impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            choice: EngineChoice::Auto,
            url: None,
            image: DEFAULT_IMAGE.to_string(),
            valkey_server: None,
            allow_flush: false,
            tls: false,
        }
    }
}

impl EngineOptions {
    /// The kind [`Engine::start`] boots for these options, known before it boots: what a run
    /// plans its lanes by (`gates/lanes.rs`). `Auto` without a url is one node, said `Binary`
    /// whether Docker then gives a container or not (both boot in well under a second).
    pub fn planned_kind(&self) -> EngineKind {
        match (self.choice, &self.url) {
            (EngineChoice::Url, _) | (EngineChoice::Auto, Some(_)) => EngineKind::Url,
            (EngineChoice::Container, _) => EngineKind::Container,
            (EngineChoice::Binary | EngineChoice::Auto, _) => EngineKind::Binary,
            (EngineChoice::Cluster, _) => EngineKind::Cluster,
            (EngineChoice::Sentinel, _) => EngineKind::Sentinel,
        }
    }
}

/// What kind of engine actually runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Container,
    Binary,
    Url,
    Cluster,
    Sentinel,
}

enum Handle {
    Container(Box<container::Running>),
    Binary(binary::Running),
    Cluster(cluster::Running),
    Sentinel(sentinel::Running),
    Url,
}

use acl::{Auth, url_of};
pub use target::Target;

/// A live engine. Dropping it stops what the harness started.
pub struct Engine {
    pub kind: EngineKind,
    /// Image (container), binary path, or the given url without password.
    pub source: String,
    pub host: String,
    pub port: u16,
    /// Who the harness's own connections are (admin, `MONITOR`, the nodes): the admin user of
    /// an engine it booted, the url's user of a `url` engine.
    admin_auth: Auth,
    /// Who a connector is, in the url it is given: [`acl::CONNECTOR_USER`] on an engine the
    /// harness booted, the url's user on a `url` engine (which keeps what its url says).
    connector_auth: Auth,
    /// The database of a `url` engine; booted engines use per-case databases.
    base_db: u32,
    /// The server's version from `INFO server` (`valkey_version`, or Redis's `redis_version`).
    pub valkey_version: String,
    /// The server product from `INFO server`: `valkey` or `redis`.
    pub product: String,
    /// Where the build came from: the `SOURCE` file beside the binary, or the image's
    /// `org.echomq.source` label; empty when unknown (a url engine).
    pub provenance: String,
    pub boot_time: Duration,
    pub allow_flush: bool,
    /// What the start removed first, left by harnesses that are gone (one line), if anything.
    pub swept: Option<String>,
    /// The health a gate's events are judged against ([`Engine::mark_health`]).
    baseline: std::sync::Mutex<Option<health::Health>>,
    /// `ACL LOG` entries read after one gate that belong to a part of another gate still running
    /// beside it (`gates/beside.rs`): held until that part is judged. The log is the engine's,
    /// one for every database, and reading it empties it.
    held_acl: std::sync::Mutex<Vec<admin::acl_log::AclLogEntry>>,
    /// A TLS engine's certificates, front and back (SPEC §10); dropped before the server.
    tls: Option<tls_boot::TlsEngine>,
    handle: Handle,
}

/// The seed a cluster url names: a primary that does not own `emq:fence`'s slot, so a connector
/// that reads the fence on the seed without routing it by slot (R8.1) meets `MOVED` at once.
fn seed_port(running: &cluster::Running, users: &acl::Users) -> Result<u16, HarnessError> {
    let first = running.nodes[0].admin_port();
    let mut admin = Admin::connect(&url_of("127.0.0.1", first, &users.admin(), 0))?;
    let v: redis::Value = admin.query(&["CLUSTER", "SLOTS"])?;
    let map = admin::shards::parse_cluster_slots(&v).map_err(HarnessError::Engine)?;
    let fence = admin::shards::slot(crate::protocol::grammar::FENCE_KEY.as_bytes());
    // CLUSTER SLOTS names the ports the nodes announce (their proxies'); the engine's own port is
    // the node's real one (the harness talks to nodes directly).
    map.iter()
        .find(|(_, ranges, _)| !admin::shards::holds(ranges, fence))
        .and_then(|(port, _, _)| running.nodes.iter().find(|n| n.has_port(*port)))
        .map(|n| n.port())
        .ok_or_else(|| HarnessError::Engine("every primary owns the fence's slot".into()))
}

impl Engine {
    /// Boots (or reaches) the engine the options ask for, after removing the engines of
    /// harnesses that are gone ([`cleanup::sweep`]; the line is in [`Engine::swept`]).
    pub fn start(opts: &EngineOptions) -> Result<Self, HarnessError> {
        let t0 = Instant::now();
        let docker = match (opts.choice, &opts.url) {
            (EngineChoice::Container, _) => true,
            (EngineChoice::Auto, None) => container::available(&opts.image),
            _ => false,
        };
        let swept = cleanup::sweep(docker);
        let mut engine = match (opts.choice, &opts.url) {
            (EngineChoice::Url, None) => {
                return Err(HarnessError::BadInput(
                    "engine url needs --url (or EMQ_ENGINE_URL)".into(),
                ));
            }
            (EngineChoice::Url | EngineChoice::Auto, Some(url)) => {
                Self::from_url(url, opts.allow_flush)?
            }
            (EngineChoice::Container, _) if opts.tls => Self::container_tls(&opts.image)?,
            (EngineChoice::Container, _) => Self::container(&opts.image)?,
            (EngineChoice::Binary | EngineChoice::Auto, None) if opts.tls => {
                Self::binary_tls(opts.valkey_server.as_deref())?
            }
            (EngineChoice::Binary, _) => Self::binary(opts.valkey_server.as_deref())?,
            (EngineChoice::Cluster, _) => Self::cluster(opts.valkey_server.as_deref(), opts.tls)?,
            (EngineChoice::Sentinel, _) => Self::sentinel(opts.valkey_server.as_deref(), opts.tls)?,
            (EngineChoice::Auto, None) => {
                if docker {
                    Self::container(&opts.image)?
                } else if let Ok(path) = binary::locate(opts.valkey_server.as_deref()) {
                    Self::binary(Some(&path))?
                } else {
                    return Err(HarnessError::Engine(format!(
                        "no engine: neither Docker with image {} nor a valkey-server binary; run ci/provision \
                         (or set EMQ_VALKEY_SERVER, or pass --url)",
                        opts.image
                    )));
                }
            }
        };
        let info = ready::retry_transient(|| engine.admin(0).and_then(|mut a| a.info("server")))?;
        let (product, version) = named::identify(&info)
            .ok_or_else(|| HarnessError::Engine("INFO server names no server version".into()))?;
        engine.product = product;
        engine.valkey_version = version;
        engine.provenance = match engine.kind {
            EngineKind::Binary | EngineKind::Cluster | EngineKind::Sentinel => {
                named::binary_source(std::path::Path::new(&engine.source))
            }
            EngineKind::Container => named::image_source(&engine.source),
            EngineKind::Url => None,
        }
        .unwrap_or_default();
        engine.boot_time = t0.elapsed();
        engine.swept = swept;
        Ok(engine)
    }

    fn container(image: &str) -> Result<Self, HarnessError> {
        let users = acl::Users::random(acl::redis_version_of_image(image));
        let running = container::start(image, &users)?;
        let (host, port) = (running.host.clone(), running.port);
        Ok(Self::booted(
            EngineKind::Container,
            image.to_string(),
            host,
            port,
            &users,
            Handle::Container(Box::new(running)),
        ))
    }

    fn binary(path: Option<&std::path::Path>) -> Result<Self, HarnessError> {
        Self::from_binary(EngineKind::Binary, path, |path, users| {
            let running = binary::start(path, users)?;
            Ok((running.port, Handle::Binary(running)))
        })
    }

    /// A cluster of `path`'s binary; with `tls`, over TLS only (SPEC §10).
    fn cluster(path: Option<&std::path::Path>, tls: bool) -> Result<Self, HarnessError> {
        Self::from_binary(EngineKind::Cluster, path, |path, users| {
            let run = tls.then(crate::tls::RunTls::new).transpose()?;
            let running = cluster::start(path, &users.clone().only_db(cluster::DB), run)?;
            let port = seed_port(&running, users)?;
            Ok((port, Handle::Cluster(running)))
        })
    }

    /// A primary, its replicas and its Sentinels of `path`'s binary ([`sentinel`]), once the
    /// replicas are in sync and the Sentinels agree. Its port is the primary's as booted: a
    /// connector's url names it until a Target for Sentinel exists (provisional; SPEC has none).
    /// With `tls`, every server over TLS only (SPEC §10).
    fn sentinel(path: Option<&std::path::Path>, tls: bool) -> Result<Self, HarnessError> {
        let engine = Self::from_binary(EngineKind::Sentinel, path, |path, users| {
            let run = tls.then(crate::tls::RunTls::new).transpose()?;
            let running = sentinel::start(path, users, run)?;
            Ok((running.nodes[0].port(), Handle::Sentinel(running)))
        })?;
        engine.wait_sentinel_ready()?;
        Ok(engine)
    }

    /// An engine of `path`'s binary (found by [`binary::locate`]) with users for its version:
    /// `start` boots what `kind` runs and says its port and handle. One way from a binary to a
    /// booted engine, so the three kinds cannot drift apart in how they find and name it.
    fn from_binary(
        kind: EngineKind,
        path: Option<&std::path::Path>,
        start: impl FnOnce(&std::path::Path, &acl::Users) -> Result<(u16, Handle), HarnessError>,
    ) -> Result<Self, HarnessError> {
        let path = binary::locate(path)?;
        let users = acl::Users::random(acl::redis_version_of_binary(&path));
        let (port, handle) = start(&path, &users)?;
        Ok(Self::booted(
            kind,
            path.display().to_string(),
            "127.0.0.1".into(),
            port,
            &users,
            handle,
        ))
    }

    /// An engine the harness started: its own users, every database its to flush.
    fn booted(
        kind: EngineKind,
        source: String,
        host: String,
        port: u16,
        users: &acl::Users,
        handle: Handle,
    ) -> Self {
        Self {
            kind,
            source,
            host,
            port,
            admin_auth: users.admin(),
            connector_auth: users.connector(),
            base_db: 0,
            valkey_version: String::new(),
            product: String::new(),
            provenance: String::new(),
            boot_time: Duration::ZERO,
            allow_flush: true,
            swept: None,
            baseline: std::sync::Mutex::default(),
            held_acl: std::sync::Mutex::default(),
            tls: None,
            handle,
        }
    }

    fn from_url(url: &str, allow_flush: bool) -> Result<Self, HarnessError> {
        let bad = || {
            HarnessError::BadInput(format!(
                "engine url {url:?}: expected redis://[:password@]host:port[/db]"
            ))
        };
        // SPEC R9.1, and the harness needs the port written out. A TLS engine is one the
        // harness boots (it makes the certificates): a `rediss://` engine url is not taken yet.
        let parsed = EngineUrl::parse(url)
            .ok()
            .filter(|u| u.scheme == Scheme::Redis)
            .ok_or_else(bad)?;
        let port = parsed.port.ok_or_else(bad)?;
        Ok(Self {
            kind: EngineKind::Url,
            source: parsed.without_password(),
            host: parsed.host.clone(),
            port,
            // The harness and the connectors are both who the url says: it makes no user.
            admin_auth: Auth::of_url(&parsed),
            connector_auth: Auth::of_url(&parsed),
            base_db: parsed.db_or_zero(),
            valkey_version: String::new(),
            product: String::new(),
            provenance: String::new(),
            boot_time: Duration::ZERO,
            allow_flush,
            swept: None,
            baseline: std::sync::Mutex::default(),
            held_acl: std::sync::Mutex::default(),
            tls: None,
            handle: Handle::Url,
        })
    }

    /// The run's certificates, on a TLS engine (SPEC §10).
    pub fn tls(&self) -> Option<&std::sync::Arc<crate::tls::RunTls>> {
        match &self.handle {
            Handle::Cluster(c) => c.tls.as_ref(),
            Handle::Sentinel(s) => s.tls.as_ref(),
            _ => self.tls.as_ref().map(|t| &t.run),
        }
    }

    /// The TLS proxy every connector of a single TLS engine connects through (its front sees
    /// each connection's first bytes and can present a certificate that must be refused).
    pub fn tls_proxy(&self) -> Option<&crate::faults::Proxy> {
        self.tls.as_ref().map(|t| &t.front)
    }

    /// True on a Valkey Cluster (SPEC §8).
    pub fn is_cluster(&self) -> bool {
        self.kind == EngineKind::Cluster
    }

    /// The database a run that asks for `db` works in: `db`, or on a cluster the one its
    /// connector's user may use, [`cluster::DB`] (SPEC R8.5), whatever it asked for.
    pub fn db_for(&self, db: u32) -> u32 {
        if self.is_cluster() { cluster::DB } else { db }
    }

    /// True when every case can own a database of its own (so cases may run in parallel).
    pub fn has_databases(&self) -> bool {
        !matches!(self.kind, EngineKind::Url | EngineKind::Cluster)
    }

    /// The harness's own password on every node (the admin user's on an engine it booted; a
    /// replica authenticates to its primary with it).
    pub fn password(&self) -> Option<&str> {
        self.admin_auth.password.as_deref()
    }

    /// The harness's own user ([`acl::ADMIN_USER`] on an engine it booted; the url's, if any).
    pub fn admin_user(&self) -> Option<&str> {
        self.admin_auth.user.as_deref()
    }

    /// The user a connector's url names (`None`: none, on a `url` engine without one).
    pub fn connector_user(&self) -> Option<&str> {
        self.connector_auth.user.as_deref()
    }

    /// Keeps an `ACL LOG` entry for the part that will be judged later (see `held_acl`).
    pub fn hold_acl(&self, entry: admin::acl_log::AclLogEntry) {
        self.held_acl
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(entry);
    }

    /// The held entries of database `db`, taken.
    pub fn take_held_acl(&self, db: u32) -> Vec<admin::acl_log::AclLogEntry> {
        let mut held = self.held_acl.lock().unwrap_or_else(|e| e.into_inner());
        let (of_db, rest) = held.drain(..).partition(|e| e.db == Some(db));
        *held = rest;
        of_db
    }

    /// True when the harness made the engine's users (SPEC R4.19): it booted the engine.
    pub fn has_acl_users(&self) -> bool {
        self.kind != EngineKind::Url
    }

    /// An admin connection (the harness's instrument) on database `db`.
    pub fn admin(&self, db: u32) -> Result<Admin, HarnessError> {
        if self.is_cluster() {
            let seed = self.url_as(&self.admin_auth, db);
            return Admin::connect_cluster(&seed, &|port| self.url_of_port(port));
        }
        Admin::connect(&self.url_as(&self.admin_auth, db))
    }

    /// Readies database `db` for a run: flushes it when the harness may; refuses otherwise.
    pub fn prepare_db(&self, db: u32) -> Result<Admin, HarnessError> {
        let mut admin = self.admin(db)?;
        if !self.allow_flush && admin.dbsize()? > 0 {
            return Err(HarnessError::BadInput(format!(
                "{} holds keys the harness did not make; pass --allow-flush to let it flush that database",
                self.source
            )));
        }
        admin.flushdb()?;
        Ok(admin)
    }

    /// Takes the engine's health as the baseline that [`Engine::health_events`] compares with:
    /// at the start of each gate, and after a change a gate made on purpose.
    pub fn mark_health(&self) {
        let now = health::snapshot(self);
        *self.baseline.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
    }

    /// What happened to the engine since [`Engine::mark_health`] that nobody asked for (a restart,
    /// an eviction, a failover, a failing node, a slot change), in words; empty when nothing did.
    pub fn health_events(&self) -> Vec<String> {
        let before = self
            .baseline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match before {
            Some(b) => health::snapshot(self).events_since(&b),
            None => Vec::new(),
        }
    }

    /// One line naming the engine: its shape, where it came from, its version, and TLS.
    pub fn describe(&self) -> String {
        let shape = match self.kind {
            EngineKind::Sentinel => format!(
                "sentinel (a primary, {} replicas, {} Sentinels)",
                sentinel::REPLICAS,
                sentinel::SENTINELS
            ),
            _ if self.is_cluster() => format!(
                "cluster ({} primaries, {} replicas)",
                cluster::PRIMARIES,
                cluster::PRIMARIES * cluster::REPLICAS_PER_PRIMARY
            ),
            _ => format!("{:?}", self.kind).to_lowercase(),
        };
        format!(
            "{shape} {} ({} {}{})",
            self.source,
            self.product,
            self.valkey_version,
            if self.tls().is_some() {
                ", TLS only"
            } else {
                ""
            }
        )
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        match &mut self.handle {
            Handle::Container(c) => c.stop(),
            Handle::Binary(b) => b.stop(),
            Handle::Cluster(c) => c.stop(),
            Handle::Sentinel(s) => s.stop(),
            Handle::Url => {}
        }
    }
}
