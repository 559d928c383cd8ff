//! How a session dials: one node's client or connection, or a cluster client, each with the
//! session's trust (its CA, or a double's TLS departure). Its own concept: the link decides what
//! to open and when, this decides how, for the first connection and every one after a loss.

use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::{ConnectionLike, RedisResult};

/// Where a session connects: its url, whether it names a cluster's seed, and on `rediss://` the
/// CA certificates (PEM) it trusts, only those (SPEC R10.1, R10.3).
#[derive(Debug, Clone)]
pub(in crate::connector::reference) struct Dial {
    pub url: String,
    pub cluster: bool,
    pub ca: Option<Vec<u8>>,
    /// A double's TLS departures ([`super::super::Quirks::tls_accept_any`], `tls_skip_names`).
    pub accept_any: bool,
    pub skip_names: bool,
    /// A double's: the seed verified, the cluster's nodes not ([`super::super::Quirks::tls_seed_only`]).
    pub seed_only: bool,
    /// A double's: the url's database on the seed's own connections only; the cluster client's
    /// node connections in database 0 ([`super::super::Quirks::select_seed_only`]).
    pub select_seed_only: bool,
    /// A permission double's paths ([`super::super::Permits::resp3`], `greet`).
    pub permits: super::super::Permits,
    /// A Sentinel deployment the url's first Sentinel belongs to (SPEC R11.1).
    pub sentinel: Option<crate::protocol::sentinel::Sentinels>,
    /// A double's Sentinel departures.
    pub sentinel_quirks: super::SentinelQuirks,
}

impl Dial {
    /// A client for one node at `url`: over TLS with the session's CA, when it has one.
    /// A cluster client on `seeds`, no retries (R4.17), with the session's trust on every node
    /// (R10.2: the nodes it discovers and every fresh client after a loss, not the seed only).
    pub(super) fn cluster_client(
        &self,
        seeds: Vec<String>,
        timeout: Duration,
    ) -> RedisResult<ClusterClient> {
        let seed = seeds.first().cloned().unwrap_or_default();
        let mut builder = ClusterClient::builder(seeds)
            .retries(0)
            .connection_timeout(timeout)
            .response_timeout(timeout);
        if self.permits.resp3 {
            builder = builder.use_protocol(redis::ProtocolVersion::RESP3);
        }
        if self.select_seed_only {
            builder = builder.database_id(0);
        }
        if self.accept_any || self.skip_names || self.seed_only {
            // A double's: the cluster client checks neither the chain nor the name.
            builder = builder.tls(redis::cluster::TlsMode::Insecure);
        } else if let Some(pem) = self.trust(&seed)? {
            builder = builder.certs(redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            });
        }
        builder.build()
    }

    /// The CA certificates (PEM) a connection to `url` trusts: the session's `ca_file`, else on
    /// `rediss://` the system's store (SPEC R10.1), else none (plaintext).
    fn trust(&self, url: &str) -> RedisResult<Option<Vec<u8>>> {
        match &self.ca {
            Some(pem) => Ok(Some(pem.clone())),
            None if url.starts_with("rediss://") => system_store().map(Some),
            None => Ok(None),
        }
    }

    pub(super) fn client(&self, url: &str) -> RedisResult<redis::Client> {
        let url = if self.accept_any && url.starts_with("rediss://") {
            format!("{url}#insecure")
        } else {
            url.to_string()
        };
        let client = match self.trust(&url)? {
            Some(pem) => redis::Client::build_with_tls(
                url.as_str(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                },
            )?,
            None => redis::Client::open(url.as_str())?,
        };
        if !self.skip_names && !self.permits.resp3 {
            return Ok(client);
        }
        let mut info = client.get_connection_info().clone();
        if self.permits.resp3 {
            // `HELLO 3 AUTH user password` in place of `AUTH` (P4.5).
            let settings = info
                .redis_settings()
                .clone()
                .set_protocol(redis::ProtocolVersion::RESP3);
            info = info.set_redis_settings(settings);
        }
        if self.skip_names {
            let mut addr = info.addr().clone();
            addr.set_danger_accept_invalid_hostnames(true);
            info = info.set_addr(addr);
        }
        redis::Client::open(info)
    }

    /// A new plain connection to `url`, with the session's timeouts, greeted as a permission
    /// double asks ([`super::super::Permits::greet`]).
    pub(super) fn connection(
        &self,
        url: &str,
        timeout: Duration,
    ) -> RedisResult<redis::Connection> {
        let con = self.client(url)?.get_connection_with_timeout(timeout)?;
        self.greeted(con, timeout)
    }

    /// [`Self::connection`], its whole set-up (the dial, TLS, `AUTH`, `SELECT`) within about
    /// `within`, whatever the node does (SPEC R11.1: a node a Sentinel named gets a share of the
    /// request's time).
    pub(super) fn connection_within(
        &self,
        url: &str,
        within: Duration,
    ) -> RedisResult<redis::Connection> {
        let con = self.bounded(url, within)?;
        self.greeted(con, within)
    }

    /// A connection whose set-up takes about `within` at most, not greeted. The crate reads each
    /// reply of its set-up with the whole timeout it is given (redis 1.8 `connection.rs`,
    /// `connect`: `AUTH`, `SELECT` and two `CLIENT SETINFO`, one read each; a silent node took
    /// 8 s at a 2 s timeout), so each read gets a share, and `CLIENT SETINFO` (optional, R4.19)
    /// is not sent.
    pub(super) fn bounded(&self, url: &str, within: Duration) -> RedisResult<redis::Connection> {
        let info = self.client(url)?.get_connection_info().clone();
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        // The dial (TLS included), then `AUTH` (or `HELLO`) and `SELECT`, a share each.
        let shares = 2 + u32::from(settings.db() != 0);
        let share = within / shares;
        redis::Client::open(info.set_redis_settings(settings))?.get_connection_with_timeout(share)
    }

    /// A connection given `timeout` for each reply, then greeted as a permission double asks.
    fn greeted(
        &self,
        mut con: redis::Connection,
        timeout: Duration,
    ) -> RedisResult<redis::Connection> {
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        if self.permits.greet {
            // A client library's set-up: a health check, a name, a transaction it gave up.
            for args in [
                &["PING"][..],
                &["CLIENT", "SETNAME", "echomq-permits"],
                &["MULTI"],
                &["DISCARD"],
            ] {
                let mut cmd = redis::cmd(args[0]);
                cmd.arg(&args[1..]);
                con.req_command(&cmd)?.extract_error()?;
            }
        }
        Ok(con)
    }
}

/// The system's store as PEM, read once per process. The crate would read it for every TLS
/// connection (redis 1.8 `create_rustls_config`, without `tls-rustls-webpki-roots`): about a
/// sixth of a TLS run's CPU, in `load_native_certs`, measured with `perf`. Its errors are the
/// crate's: any certificate that fails to load fails the connection.
fn system_store() -> RedisResult<Vec<u8>> {
    static STORE: std::sync::OnceLock<Result<Vec<u8>, String>> = std::sync::OnceLock::new();
    let store = STORE.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        if let Some(e) = found.errors.first() {
            return Err(e.to_string());
        }
        let pems: Vec<pem::Pem> = found
            .certs
            .iter()
            .map(|c| pem::Pem::new("CERTIFICATE", c.to_vec()))
            .collect();
        Ok(pem::encode_many(&pems).into_bytes())
    });
    store.clone().map_err(|e| {
        redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "the system's trust store",
            e,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::Dial;

    fn dial(ca: Option<&[u8]>) -> Dial {
        Dial {
            url: "rediss://emq:pw@localhost:6380/0".into(),
            cluster: false,
            ca: ca.map(<[u8]>::to_vec),
            accept_any: false,
            skip_names: false,
            seed_only: false,
            select_seed_only: false,
            permits: Default::default(),
            sentinel: None,
            sentinel_quirks: Default::default(),
        }
    }

    #[test]
    fn a_session_trusts_its_ca_else_on_rediss_the_systems_store_else_nothing() {
        let ca = b"-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n";
        let with_ca = dial(Some(ca));
        assert_eq!(
            with_ca.trust("rediss://h:1").unwrap().as_deref(),
            Some(&ca[..])
        );
        let without = dial(None);
        assert_eq!(without.trust("redis://h:1").unwrap(), None);
        // The system's store (R10.1): every certificate rustls-native-certs finds, read once.
        let system = without.trust("rediss://h:1").unwrap().expect("a store");
        let text = String::from_utf8(system).unwrap();
        let found = rustls_native_certs::load_native_certs().certs.len();
        assert!(found > 0, "this machine has a system store");
        assert_eq!(text.matches("-----BEGIN CERTIFICATE-----").count(), found);
        assert_eq!(
            without.trust("rediss://other:2").unwrap(),
            Some(text.into_bytes())
        );
    }
}
