//! The urls the engine hands out: a connector's (`connect`'s url and [`Target`], SPEC §5, §8,
//! §10) and the harness's own, as its user.

use super::acl::{Auth, url_of};
use super::{Engine, EngineKind, Handle, Target};
use crate::protocol::url::{EngineUrl, Scheme};

impl Engine {
    /// The `redis://` url a connector is given for database `db` (booted engines): the
    /// connector's user and password (SPEC §5). A url engine has its one database; a cluster
    /// has database 0 only, and the url names its seed node.
    pub fn url(&self, db: u32) -> String {
        self.url_as(&self.connector_auth, db)
    }

    /// [`Engine::url`] as `auth`: the connector's, or the harness's admin.
    pub(super) fn url_as(&self, auth: &Auth, db: u32) -> String {
        let (port, db) = match (&self.handle, self.kind) {
            (_, EngineKind::Url) => (self.port, self.base_db),
            (Handle::Cluster(_), _) => (self.booted_admin_port(), self.db_for(db)),
            // A TLS Sentinel engine's primary listens on TLS only: its plaintext back.
            (Handle::Sentinel(_), _) => (self.booted_admin_port(), db),
            _ => (self.port, db),
        };
        url_of(&self.host, port, auth, db)
    }

    /// Where the harness reaches the booted node at the engine's port: its own port, or on a
    /// TLS engine its plaintext back.
    fn booted_admin_port(&self) -> u16 {
        self.booted_node(self.seed())
            .map_or(self.port, |n| n.admin_port())
    }

    /// Where a connector connects for database `db`: [`Engine::url`]; on a cluster, the seed
    /// node's fault proxy (every connection a cluster client makes goes through a proxy), flagged.
    pub fn target(&self, db: u32) -> Target {
        match &self.handle {
            // The seed: a primary that does not own the fence's slot ([`seed_port`]), as its
            // proxy (the port it announces).
            Handle::Cluster(c) => match &c.tls {
                // The seed's TLS front, by the name its certificate gives (SPEC §10).
                Some(run) => Target {
                    url: self.tls_url(self.announced_port(self.seed()), self.db_for(db)),
                    cluster: true,
                    ca_file: Some(run.ca_file()),
                    sentinel: None,
                },
                None => Target {
                    url: url_of(
                        &self.host,
                        self.announced_port(self.seed()),
                        &self.connector_auth,
                        self.db_for(db),
                    ),
                    cluster: true,
                    ca_file: None,
                    sentinel: None,
                },
            },
            // The first Sentinel (its proxy), with every Sentinel in order (SPEC R11.1).
            Handle::Sentinel(s) => {
                let host = super::sentinel::announced_host(s.tls.is_some());
                let nodes: Vec<String> = s
                    .sentinels
                    .iter()
                    .map(|n| format!("{host}:{}", n.announced()))
                    .collect();
                let first = s.sentinels[0].announced();
                Target {
                    url: match &s.tls {
                        Some(_) => self.tls_url(first, db),
                        None => url_of(host, first, &self.connector_auth, db),
                    },
                    cluster: false,
                    ca_file: s.tls.as_ref().map(|run| run.ca_file()),
                    sentinel: Some(crate::protocol::sentinel::Sentinels {
                        name: super::sentinel::PRIMARY_NAME.into(),
                        nodes,
                    }),
                }
            }
            _ => match &self.tls {
                // Through the TLS proxy, by the name its certificate gives (SPEC §10).
                Some(t) => Target {
                    url: self.tls_url(t.front.port(), db),
                    cluster: false,
                    ca_file: Some(t.run.ca_file()),
                    sentinel: None,
                },
                None => Target::single(self.url(db)),
            },
        }
    }

    /// The `rediss://` url of a TLS front at `port`, by the name its certificate gives.
    fn tls_url(&self, port: u16, db: u32) -> String {
        EngineUrl {
            scheme: Scheme::Rediss,
            user: self.connector_auth.user.clone(),
            password: self.connector_auth.password.clone(),
            host: crate::tls::TLS_HOST.into(),
            port: Some(port),
            db: Some(db),
        }
        .to_string()
    }

    /// [`Engine::target`], but on a TLS engine straight to its TLS port, past the proxy: for
    /// the bench, which compares the connector with `valkey-benchmark --tls` on the same path.
    pub fn direct_target(&self, db: u32) -> Target {
        let t = self.target(db);
        match &self.tls {
            Some(tls) => t.map_url(|u| u.with_port(tls.port)),
            None => t,
        }
    }
}
