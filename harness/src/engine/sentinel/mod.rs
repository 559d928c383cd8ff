//! The Sentinel engine: a primary and [`REPLICAS`] replicas of binary `valkey-server`s on
//! loopback, watched by [`SENTINELS`] Sentinels (`valkey-server sentinel.conf --sentinel`) that
//! fail the primary over when it stops answering, as a managed Valkey with Sentinel does.
//!
//! **Every address Sentinel hands out is a fault proxy's**, as on the cluster: each data node and
//! each Sentinel is a [`Node`] behind its own [`crate::faults::Proxy`]. The Sentinels monitor the
//! primary at its proxy, a replica announces its proxy (`replica-announce-ip/port`, which the
//! primary's `INFO replication` and so the Sentinels report) and a Sentinel announces its proxy
//! to its peers (`announce-ip/port`). So `SENTINEL get-master-addr-by-name` names a proxy, and a
//! failover's `REPLICAOF` too: unlike the cluster's, replication and the Sentinels' hello
//! channel run through the proxies, which relay a connection byte for byte once it is a
//! replication stream or a subscription (`crate::faults`). The harness's own connections go to
//! the real ports ([`Node::admin_port`]).
//!
//! The users are the run's on every data node (a replica authenticates to its primary as the
//! admin, and any node may become a replica); the Sentinels authenticate to the data nodes and to
//! each other as the admin too. A Sentinel has the admin, `default` off, and the connector's user
//! with the run's connector password, holding only what a client asks a Sentinel
//! ([`Users::sentinel_connector_rules`]: find the primary, refresh the Sentinel list, hear of a
//! failover on `+switch-master`), so a connector cannot steer the Sentinels.
//!
//! **Over TLS** (SPEC §10) every server listens on a TLS port only, data nodes and Sentinels
//! alike, with the run's certificate; each proxy is a TLS front with a plaintext back for the
//! harness, as on the TLS cluster. Replication, the Sentinels' links to the data nodes and to
//! each other are TLS (`tls-replication yes`, which a Sentinel also reads for its own links), and
//! every address a Sentinel hands out names [`TLS_HOST`] (`announce-hostnames`), the one name
//! the certificates give: a client that connects by address cannot verify it (R10.4). A
//! Sentinel resolves a name once, to its first address, and every proxy listens on 127.0.0.1:
//! so `localhost` must resolve there first (`/etc/hosts`), not to `::1`.

mod promotion;
mod queries;

use std::path::Path;
use std::sync::Arc;

use crate::engine::acl::{ADMIN_USER, CONNECTOR_USER, Users, url_of};
use crate::engine::admin::Admin;
use crate::engine::binary;
use crate::engine::proxied::Node;
use crate::error::HarnessError;
use crate::tls::{RunTls, TLS_HOST};

/// The name the Sentinels monitor the primary by (`SENTINEL get-master-addr-by-name emq`).
pub const PRIMARY_NAME: &str = "emq";
/// Replicas of the primary.
pub const REPLICAS: usize = 2;
/// Sentinels watching it.
pub const SENTINELS: usize = 3;
/// Sentinels that must find the primary down before one fails it over (a majority of three).
pub const QUORUM: usize = 2;
/// How long the primary may not answer before a Sentinel finds it down: short, so a test's
/// failover takes seconds; not shorter, so a primary starved of CPU for a moment on a shared
/// machine is not failed over unasked (a gate would meet that as an engine event).
pub const DOWN_AFTER_MS: u32 = 2_000;
/// How long a failover may take before a Sentinel tries again (twice this), and the bound on
/// reconfiguring the replicas: short, so a split vote is retried within seconds.
pub const FAILOVER_TIMEOUT_MS: u32 = 6_000;

/// A running Sentinel engine; every process is killed on drop (and on Ctrl-C, and by a later
/// run's sweep if this one is SIGKILLed: each is a binary engine with its owner file).
pub struct Running {
    /// The data nodes in boot order ([`crate::engine::topology::NodeId`]): the first booted as
    /// the primary, the others as its replicas.
    pub nodes: Vec<Node>,
    /// The Sentinels in boot order ([`crate::engine::topology::SentinelId`]).
    pub sentinels: Vec<Node>,
    /// A TLS engine's certificates (SPEC §10).
    pub tls: Option<Arc<RunTls>>,
    /// The data node that is the primary now: node 0 at boot, another after G8's failover
    /// ([`crate::engine::Engine::seed`]; the harness's own connections follow it).
    pub primary: std::sync::atomic::AtomicUsize,
}

impl Running {
    /// The Sentinel one of whose addresses is `port`.
    pub fn sentinel_at(&self, port: u16) -> Option<usize> {
        self.sentinels.iter().position(|n| n.has_port(port))
    }

    /// Kills every process: the Sentinels first, so none fails over a primary killed before them.
    pub fn stop(&mut self) {
        for n in self.sentinels.iter_mut().chain(self.nodes.iter_mut()) {
            n.server.stop();
        }
    }
}

/// A boot that fails half-way leaves nothing running either.
impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Boots the data nodes (the replicas told to follow the primary's proxy) and the Sentinels
/// (monitoring it). Waiting until they agree is the engine's ([`queries`]): it asks by
/// [`crate::engine::topology::NodeId`]. A process that fails to start stops the others (drop).
/// With `tls`, every server over TLS only ([module doc](self)).
pub fn start(
    server: &Path,
    users: &Users,
    tls: Option<Arc<RunTls>>,
) -> Result<Running, HarnessError> {
    let mut running = Running {
        nodes: Vec::new(),
        sentinels: Vec::new(),
        tls,
        primary: Default::default(),
    };
    let boot = Boot::new(server, users, running.tls.as_ref());
    for i in 0..=REPLICAS {
        let node = boot.data_node()?;
        if i > 0 {
            let primary = running.nodes[0].announced().to_string();
            admin_of(&node, users)?.query::<()>(&["REPLICAOF", boot.host, &primary])?;
        }
        running.nodes.push(node);
    }
    let primary = running.nodes[0].announced();
    for _ in 0..SENTINELS {
        running.sentinels.push(boot.sentinel(primary)?);
    }
    Ok(running)
}

/// The host every address of the engine names, as the nodes and Sentinels announce it: the
/// certificates' one name over TLS (R10.4), loopback's address otherwise.
pub fn announced_host(tls: bool) -> &'static str {
    if tls { TLS_HOST } else { "127.0.0.1" }
}

/// What every server of one engine boots with: the binary, the run's users, its TLS, and the
/// host every address names.
struct Boot<'a> {
    server: &'a Path,
    users: &'a Users,
    tls: Option<&'a Arc<RunTls>>,
    /// [`announced_host`], once for every server.
    host: &'static str,
}

impl<'a> Boot<'a> {
    fn new(server: &'a Path, users: &'a Users, tls: Option<&'a Arc<RunTls>>) -> Self {
        Self {
            server,
            users,
            tls,
            host: announced_host(tls.is_some()),
        }
    }

    /// A data node behind its proxy, announcing it. Every node may become a replica (a failover
    /// makes one of any), so every node authenticates to a primary as the admin; a diskless sync
    /// starts at once (no delay to gather replicas: a restarted node rejoins in a moment). With
    /// `tls`, it listens and replicates over TLS only.
    fn data_node(&self) -> Result<Node, HarnessError> {
        let (users, tls) = (self.users, self.tls);
        let mut flags = users.replication_flags();
        flags.extend(["--repl-diskless-sync-delay", "0"].map(String::from));
        if tls.is_some() {
            flags.extend(["--tls-replication", "yes"].map(String::from));
        }
        let running =
            binary::start_picking(self.server, users, &|| Ok(flags.clone()), tls.map(|t| &**t))?;
        let mut node = Node::behind_proxy(running, tls)?;
        let announce = [
            ("replica-announce-ip", self.host.to_string()),
            ("replica-announce-port", node.announced().to_string()),
        ];
        set_all(&node, users, &["CONFIG", "SET"], &announce)?;
        node.announce = announce
            .iter()
            .flat_map(|(k, v)| [format!("--{k}"), v.clone()])
            .collect();
        Ok(node)
    }

    /// The text of a Sentinel's `sentinel.conf`: its users and how it authenticates to its peers;
    /// the primary it monitors at `primary` (its proxy), how it authenticates there, and how soon it
    /// fails it over. All in the file, so the Sentinel's first connection already authenticates
    /// (one made before a `SENTINEL SET auth-pass` would be refused until it is made again). With
    /// `tls`, its links are TLS and it names every node by [`TLS_HOST`] (a name it resolves to
    /// reach it, and hands out as given).
    fn sentinel_conf(&self, primary: u16) -> String {
        let (users, tls, host) = (self.users, self.tls.is_some(), self.host);
        let pw = &users.admin_password;
        let hostnames = if tls { "yes" } else { "no" };
        let tls_line = if tls { "tls-replication yes\n" } else { "" };
        let set = |k: &str, v: &dyn std::fmt::Display| format!("sentinel {k} {PRIMARY_NAME} {v}\n");
        let connector = format!(
            "{CONNECTOR_USER} on >{} {}",
            users.connector_password,
            users.sentinel_connector_rules().join(" ")
        );
        format!(
            "user default off\n\
             user {ADMIN_USER} on >{pw} ~* &* +@all\n\
             user {connector}\n\
             sentinel sentinel-user {ADMIN_USER}\n\
             sentinel sentinel-pass {pw}\n\
             sentinel resolve-hostnames {hostnames}\n\
             sentinel announce-hostnames {hostnames}\n\
             sentinel monitor {PRIMARY_NAME} {host} {primary} {QUORUM}\n"
        ) + tls_line
            + &[
                set("auth-user", &ADMIN_USER),
                set("auth-pass", pw),
                set("down-after-milliseconds", &DOWN_AFTER_MS),
                set("failover-timeout", &FAILOVER_TIMEOUT_MS),
                set("parallel-syncs", &REPLICAS),
            ]
            .concat()
    }

    /// A Sentinel behind its proxy, announcing it, monitoring the primary at `primary` (its proxy).
    /// Its proxy is known once it runs: a hello it sent before naming its own port is corrected by
    /// the next (its peers switch a Sentinel's address by its run id).
    fn sentinel(&self, primary: u16) -> Result<Node, HarnessError> {
        let (users, tls) = (self.users, self.tls);
        let conf = self.sentinel_conf(primary);
        let running = binary::start_sentinel(self.server, users, conf, tls.map(|t| &**t))?;
        let node = Node::behind_proxy(running, tls)?;
        let announce = [
            ("announce-ip", self.host.to_string()),
            ("announce-port", node.announced().to_string()),
        ];
        set_all(&node, users, &["SENTINEL", "CONFIG", "SET"], &announce)?;
        Ok(node)
    }
}

/// The harness's connection to `node` (its real port, as the admin), while it boots: asked
/// again while a server just started refuses or resets it (a loaded CI run met a reset here).
fn admin_of(node: &Node, users: &Users) -> Result<Admin, HarnessError> {
    let url = url_of("127.0.0.1", node.admin_port(), &users.admin(), 0);
    crate::engine::ready::retry_transient(|| Admin::connect(&url))
}

/// `CONFIG SET` (or `SENTINEL CONFIG SET`: `command` says which) of `pairs` on `node`, an error
/// naming the node's port and the setting it refused.
fn set_all(
    node: &Node,
    users: &Users,
    command: &[&str],
    pairs: &[(&str, String)],
) -> Result<(), HarnessError> {
    let mut admin = admin_of(node, users)?;
    for (name, value) in pairs {
        let args: Vec<&str> = command.iter().copied().chain([*name, value]).collect();
        admin.query::<()>(&args).map_err(|e| {
            HarnessError::Engine(format!(
                "the node at port {} refused {}: {e}",
                node.port(),
                args[..args.len() - 1].join(" ")
            ))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot<'a>(users: &'a Users, tls: Option<&'a Arc<RunTls>>) -> Boot<'a> {
        Boot::new(Path::new("valkey-server"), users, tls)
    }

    #[test]
    fn a_sentinel_has_the_admin_and_a_least_connector_and_says_who_it_is_to_its_peers() {
        let users = crate::engine::acl::Users {
            admin_password: "a1".into(),
            connector_password: "c2".into(),
            redis: None,
            db: None,
        };
        let conf = boot(&users, None).sentinel_conf(7000);
        let lines: Vec<&str> = conf.lines().collect();
        assert_eq!(lines[0], "user default off");
        assert_eq!(lines[1], "user emq-admin on >a1 ~* &* +@all");
        for line in [
            "sentinel sentinel-user emq-admin",
            "sentinel sentinel-pass a1",
            "sentinel monitor emq 127.0.0.1 7000 2",
            "sentinel auth-user emq emq-admin",
            "sentinel auth-pass emq a1",
            "sentinel down-after-milliseconds emq 2000",
        ] {
            assert!(lines.contains(&line), "{line:?} in {conf}");
        }
        let connector = lines[2].split(' ').collect::<Vec<_>>();
        assert_eq!(connector[..4], ["user", "emq", "on", ">c2"], "{conf}");
        assert_eq!(
            connector[4..8],
            ["resetkeys", "resetchannels", "&+switch-master", "-@all"]
        );
        let granted: Vec<&str> = connector[8..].to_vec();
        assert_eq!(
            granted,
            [
                "+auth",
                "+hello",
                "+ping",
                "+client|setinfo",
                "+client|setname",
                "+sentinel|get-master-addr-by-name",
                "+sentinel|get-primary-addr-by-name",
                "+sentinel|sentinels",
                "+subscribe",
                "+unsubscribe",
                "+psubscribe",
                "+punsubscribe",
            ],
            "nothing that steers a Sentinel, no SELECT (a Sentinel does not know it)"
        );
        // A Redis before 7.2 has no CLIENT SETINFO, and no Redis the Valkey spelling
        // get-primary-addr-by-name: either rule would stop its Sentinel at start.
        let redis70 = crate::engine::acl::Users {
            redis: Some((7, 0)),
            ..users
        };
        let redis_conf = boot(&redis70, None).sentinel_conf(7000);
        assert!(!redis_conf.contains("setinfo"), "{redis_conf}");
        assert!(!redis_conf.contains("get-primary"), "{redis_conf}");
        assert!(redis_conf.contains("+sentinel|get-master-addr-by-name"));
        assert!(!conf.contains("tls"));
    }

    #[test]
    fn a_tls_sentinel_links_over_tls_and_names_every_node_by_the_certificates_name() {
        let users = crate::engine::acl::Users::random(None);
        let run = crate::tls::RunTls::new().unwrap();
        let conf = boot(&users, Some(&run)).sentinel_conf(7000);
        let lines: Vec<&str> = conf.lines().collect();
        for line in [
            "sentinel resolve-hostnames yes",
            "sentinel announce-hostnames yes",
            "sentinel monitor emq localhost 7000 2",
            "tls-replication yes",
        ] {
            assert!(lines.contains(&line), "{line:?} in {conf}");
        }
        assert!(!conf.contains("127.0.0.1"), "{conf}");
    }
}
