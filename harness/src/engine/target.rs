//! Where a connector connects ([`Target`]), and SPEC R9.1 for an engine given by url.

use crate::protocol::sentinel::Sentinels;
use crate::protocol::url::{EngineUrl, UrlError};

/// Where a connector connects: the url of `connect`, and whether it names a cluster's seed node
/// (wire v1's optional `cluster`, SPEC R8.1). From a plain url it is a single engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    pub cluster: bool,
    /// The CA file of a TLS engine (`connect`'s `ca_file`, SPEC R10.1).
    pub ca_file: Option<String>,
    /// On a Sentinel deployment, its name and Sentinels; the url names the first (SPEC R11.1).
    pub sentinel: Option<Sentinels>,
}

impl Target {
    /// A single engine at `url`.
    pub fn single(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            cluster: false,
            ca_file: None,
            sentinel: None,
        }
    }

    /// The same target at `url` (a proxy's), CA and cluster flag kept.
    pub fn at(&self, url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..self.clone()
        }
    }

    /// The url, parsed (SPEC R9.1). It stays text in the target: a gate hands a connector urls
    /// that are no engine url on purpose (G6), and the connector is what must refuse them.
    pub fn engine_url(&self) -> Result<EngineUrl, UrlError> {
        EngineUrl::parse(&self.url)
    }

    /// The same target with its url rewritten by `f`, CA and cluster flag kept; a url that is no
    /// engine url is kept as it is (the connector is what refuses it).
    pub fn map_url(&self, f: impl FnOnce(EngineUrl) -> EngineUrl) -> Self {
        match self.engine_url() {
            Ok(u) => self.at(f(u).to_string()),
            Err(_) => self.clone(),
        }
    }
}

impl From<&str> for Target {
    fn from(url: &str) -> Self {
        Self::single(url)
    }
}

impl From<&String> for Target {
    fn from(url: &String) -> Self {
        Self::single(url.as_str())
    }
}

impl From<String> for Target {
    fn from(url: String) -> Self {
        Self::single(url)
    }
}

impl From<&Target> for Target {
    fn from(t: &Target) -> Self {
        t.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_url_rewrites_an_engine_url_and_keeps_any_other_as_it_is() {
        let t = Target {
            url: "rediss://emq:pw@localhost:7000/3".into(),
            cluster: true,
            ca_file: Some("/ca.pem".into()),
            sentinel: None,
        };
        assert_eq!(t.engine_url().map(|u| u.db), Ok(Some(3)));
        let moved = t.map_url(|u| u.with_port(7003).with_db(Some(0)));
        assert_eq!(moved, t.at("rediss://emq:pw@localhost:7003/0"));
        let bad = Target::single("redis://h:port/0");
        assert!(bad.engine_url().is_err());
        assert_eq!(bad.map_url(|u| u.with_db(Some(0))), bad);
    }
}

/// The engine's `--url`: SPEC's url rule with the port written out; nothing here connects.
#[cfg(test)]
mod url_tests {
    use crate::engine::Engine;

    #[test]
    fn a_url_engine_takes_its_host_port_password_and_database_from_the_url() {
        let e = Engine::from_url("redis://:pw@127.0.0.1:6380/3", false).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.password()),
            ("127.0.0.1", 6380, Some("pw"))
        );
        assert_eq!(
            (e.base_db, e.source.as_str()),
            (3, "redis://127.0.0.1:6380/3")
        );
        assert_eq!(e.url(7), "redis://:pw@127.0.0.1:6380/3");
        let e = Engine::from_url("redis://127.0.0.1:6380", true).unwrap();
        assert_eq!(
            (e.password(), e.base_db, e.url(0)),
            (None, 0, "redis://127.0.0.1:6380/0".into())
        );
    }

    #[test]
    fn a_url_that_is_not_an_engine_url_is_bad_input() {
        for bad in [
            "rediss://h:1/0",
            "redis://h/0",
            "redis://h:x/0",
            "redis://h:1/x",
            "redis://:1/0",
        ] {
            let e = Engine::from_url(bad, false).err().expect(bad);
            assert_eq!(
                e.to_string(),
                format!(
                    "bad input: engine url {bad:?}: expected redis://[:password@]host:port[/db]"
                )
            );
        }
    }
}
