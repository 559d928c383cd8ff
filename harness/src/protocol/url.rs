//! An engine url, `redis://[[user]:password@]host[:port][/db]`, parsed once: the engine's
//! `--url`, `connect`'s url (SPEC R9.1), the bench's `valkey-benchmark` flags and a
//! cluster node's url all read it here, so the rule has one spelling.
//!
//! What it accepts is SPEC's rule: the harness sends `redis://[:password@]host:port[/db]`, or
//! `rediss://` with the same rest on a TLS engine (§10); a port or a `/db` that is not a decimal
//! integer is refused (`connect-url-not-numeric`), and so is every other scheme
//! (`connect-url-scheme-redis-only`). Beyond that SPEC lets a connector
//! accept what its client accepts, so a user name, an IPv6 literal in brackets and a missing port
//! (the client's default) parse; a caller that needs an explicit port (the engine) asks
//! [`EngineUrl::port`]. The password is kept as written (not percent-decoded): every url this
//! builds goes to a client that decodes it.

use std::fmt;

/// The scheme of an engine url.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `redis://`: plain TCP.
    Redis,
    /// `rediss://`: TLS (SPEC §10).
    Rediss,
}

impl Scheme {
    /// Every scheme the harness speaks (`rediss://` first: `redis://` is its prefix's prefix).
    pub const ALL: [Scheme; 2] = [Scheme::Rediss, Scheme::Redis];

    /// `redis://` or `rediss://`.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Redis => "redis://",
            Self::Rediss => "rediss://",
        }
    }
}

/// Why a url is not an engine url.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("url {0:?} must start with redis:// or rediss://")]
    Scheme(String),
    #[error("url {0:?} names no host")]
    Host(String),
    #[error("url {url:?}: port {port:?} is not a decimal integer in 0..=65535")]
    Port { url: String, port: String },
    #[error("url {url:?}: database {db:?} is not a decimal integer")]
    Db { url: String, db: String },
}

/// An engine url, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineUrl {
    pub scheme: Scheme,
    /// The user name before the password (`redis://user:pw@...`), if any.
    pub user: Option<String>,
    /// The password, as written; `None` when absent or empty.
    pub password: Option<String>,
    /// As written (an IPv6 literal keeps its brackets).
    pub host: String,
    /// `None`: the url names no port (the client's default).
    pub port: Option<u16>,
    /// `None`: the url names no database (database 0).
    pub db: Option<u32>,
}

impl EngineUrl {
    /// Parses `url` by SPEC's rule (see the module docs).
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let (scheme, rest) = Scheme::ALL
            .into_iter()
            .find_map(|s| url.strip_prefix(s.prefix()).map(|rest| (s, rest)))
            .ok_or_else(|| UrlError::Scheme(url.to_string()))?;
        // The last `@` ends the credentials: a password may hold `@`, a host never does.
        let (auth, hostpart) = match rest.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, rest),
        };
        // `user:password`, `:password`, or a bare `password` (a Redis habit the engine's
        // `--url` always took).
        let (user, password) = match auth.map(|a| a.split_once(':')) {
            Some(Some((u, p))) => (Some(u), Some(p)),
            Some(None) => (None, auth),
            None => (None, None),
        };
        let (hostport, db) = match hostpart.split_once('/') {
            Some((hp, "")) => (hp, None),
            Some((hp, db)) => (
                hp,
                Some(decimal(db).ok_or_else(|| UrlError::Db {
                    url: url.to_string(),
                    db: db.to_string(),
                })?),
            ),
            None => (hostpart, None),
        };
        let (host, port) = split_port(hostport);
        if host.is_empty() {
            return Err(UrlError::Host(url.to_string()));
        }
        let port = match port {
            Some(p) => Some(decimal(p).ok_or_else(|| UrlError::Port {
                url: url.to_string(),
                port: p.to_string(),
            })?),
            None => None,
        };
        let some = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_string);
        Ok(Self {
            scheme,
            user: some(user),
            password: some(password),
            host: host.to_string(),
            port,
            db,
        })
    }

    /// The database it names: 0 when none.
    pub fn db_or_zero(&self) -> u32 {
        self.db.unwrap_or(0)
    }

    /// The same url on port `port`.
    pub fn with_port(&self, port: u16) -> Self {
        Self {
            port: Some(port),
            ..self.clone()
        }
    }

    /// The same url naming database `db` (`None`: no `/db`).
    pub fn with_db(&self, db: Option<u32>) -> Self {
        Self { db, ..self.clone() }
    }

    /// The url with host and port only: no credentials, database shown (`redis://h:p/db`), for
    /// messages and records (a password is never shown).
    pub fn without_password(&self) -> String {
        let mut s = format!("{}{}", self.scheme.prefix(), self.host);
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        s.push_str(&format!("/{}", self.db_or_zero()));
        s
    }
}

/// `redis://[user][:password@]host[:port][/db]`, as parsed (a url that named no `/db` names
/// none here either).
impl fmt::Display for EngineUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.scheme.prefix())?;
        match (&self.user, &self.password) {
            (Some(u), Some(p)) => write!(f, "{u}:{p}@")?,
            (None, Some(p)) => write!(f, ":{p}@")?,
            (Some(u), None) => write!(f, "{u}@")?,
            (None, None) => {}
        }
        f.write_str(&self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        if let Some(db) = self.db {
            write!(f, "/{db}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for EngineUrl {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<Self, UrlError> {
        Self::parse(s)
    }
}

/// Digits only (no sign, no blanks), in range for `T`.
fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `host:port` → host and the port's text; an IPv6 literal `[::1]:6379` keeps its brackets.
fn split_port(hostport: &str) -> (&str, Option<&str>) {
    if hostport.starts_with('[')
        && let Some(end) = hostport.find(']')
    {
        let (host, rest) = hostport.split_at(end + 1);
        return (
            host,
            rest.strip_prefix(':')
                .or(Some(rest).filter(|r| !r.is_empty())),
        );
    }
    match hostport.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (hostport, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> EngineUrl {
        EngineUrl::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn the_harness_urls_parse_into_their_parts() {
        let u = url("redis://:pw@127.0.0.1:7001/950");
        assert_eq!(u.scheme, Scheme::Redis);
        assert_eq!((u.user, u.password.as_deref()), (None, Some("pw")));
        assert_eq!(
            (u.host.as_str(), u.port, u.db),
            ("127.0.0.1", Some(7001), Some(950))
        );
        let u = url("redis://127.0.0.1:7001");
        assert_eq!(
            (u.db_or_zero(), u.password, u.port, u.db),
            (0, None, Some(7001), None)
        );
        assert_eq!(url("redis://h:1/").db, None);
    }

    #[test]
    fn credentials_user_password_and_a_bare_password() {
        let u = url("redis://u:p%40ss@h:2/0");
        assert_eq!(
            (u.user.as_deref(), u.password.as_deref()),
            (Some("u"), Some("p%40ss"))
        );
        assert_eq!(url("redis://:a@b@h:2").password.as_deref(), Some("a@b"));
        assert_eq!(url("redis://pw@h:2").password.as_deref(), Some("pw"));
        assert_eq!(url("redis://:@h:2").password, None);
    }

    #[test]
    fn what_spec_lets_a_client_accept_parses() {
        let u = url("redis://[::1]:6380/1");
        assert_eq!(
            (u.host.as_str(), u.port, u.db),
            ("[::1]", Some(6380), Some(1))
        );
        assert_eq!(url("redis://[::1]").port, None);
        let u = url("redis://model");
        assert_eq!((u.host.as_str(), u.port), ("model", None));
        let u = url("rediss://:pw@localhost:6380/2");
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.db),
            (Scheme::Rediss, "localhost", Some(6380), Some(2))
        );
        assert_eq!(u.to_string(), "rediss://:pw@localhost:6380/2");
    }

    #[test]
    fn spec_refuses_other_schemes_and_a_port_or_db_that_is_not_a_decimal_integer() {
        let kind = |s: &str| match EngineUrl::parse(s) {
            Err(UrlError::Scheme(_)) => "scheme",
            Err(UrlError::Host(_)) => "host",
            Err(UrlError::Port { .. }) => "port",
            Err(UrlError::Db { .. }) => "db",
            Ok(_) => "accepted",
        };
        let refused = [
            (
                "scheme",
                &[
                    "redisss://h:1",
                    "unix:///tmp/s",
                    "http://h:1",
                    "h:1",
                    "redis:/h:1",
                ][..],
            ),
            (
                "port",
                &[
                    "redis://h:port/0",
                    "redis://h:99999",
                    "redis://h:+1",
                    "redis://h:/0",
                    "redis://h:1?db=2",
                ],
            ),
            (
                "db",
                &[
                    "redis://h:1/abc",
                    "redis://h:1/1x",
                    "redis://h:1/1/2",
                    "redis://h:1/-1",
                    "redis://h:1/0?x=1",
                ],
            ),
            ("host", &["redis://", "redis://:1", "redis://:pw@:1/0"]),
        ];
        for (want, urls) in refused {
            for url in urls {
                assert_eq!(kind(url), want, "{url}");
            }
        }
    }

    #[test]
    fn it_prints_as_parsed_and_moves_to_another_port_or_database() {
        for s in [
            "redis://:pw@127.0.0.1:7001/950",
            "redis://h:1",
            "redis://u:p%40ss@h:2/0",
            "redis://[::1]:6380/1",
        ] {
            assert_eq!(url(s).to_string(), s);
        }
        let seed = url("redis://:pw@127.0.0.1:7000/0");
        assert_eq!(
            seed.with_port(7003).to_string(),
            "redis://:pw@127.0.0.1:7003/0"
        );
        assert_eq!(
            seed.with_db(Some(3)).to_string(),
            "redis://:pw@127.0.0.1:7000/3"
        );
        assert_eq!(seed.with_db(None).to_string(), "redis://:pw@127.0.0.1:7000");
        assert_eq!(seed.without_password(), "redis://127.0.0.1:7000/0");
    }
}
