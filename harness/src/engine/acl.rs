//! The users of an engine the harness boots (SPEC R4.19), as managed Valkey hands them out: an
//! **admin** user for the harness's own connections (every command, key and channel), a
//! **connector** user ([`CONNECTOR_USER`]) holding exactly the commands SPEC lets a connector
//! send (`crate::protocol::commands`), and the `default` user off, so a connector gets in only
//! with the url's user. Both passwords are made per run.
//!
//! They are given as command-line flags (`--user ...`), not an ACL file: the flags reach a binary
//! and a container alike (a file would need a mount into the container), a cluster node
//! restarted by G8 gets them again with the rest of its flags, and the passwords were on the
//! command line before (`--requirepass`) on a loopback engine that lives for one run.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::protocol::url::{EngineUrl, Scheme};

/// The harness's own user: every command, every key and channel.
pub const ADMIN_USER: &str = "emq-admin";

/// The user the url a connector is given names (SPEC R9.1).
pub const CONNECTOR_USER: &str = "emq";

/// The connection set-up a connector's user holds on a Sentinel as on a data node
/// ([`Users::sentinel_connector_rules`]); `SELECT` is not among them: a Sentinel has no
/// databases and does not know the command.
pub const SENTINEL_CONNECTION: [&str; 5] =
    ["auth", "hello", "ping", "client|setname", "client|setinfo"];

/// The channel a Sentinel announces a failover on (`+switch-master <name> <old> <new>`), the
/// one a connector may subscribe to there.
pub const SWITCH_CHANNEL: &str = "+switch-master";

/// A fresh random password per run.
pub fn random_password() -> String {
    let bytes: [u8; 16] = rand::random();
    hex::encode(bytes)
}

/// The url of database `db` at `host:port`, with the user and password of `auth`.
pub(super) fn url_of(host: &str, port: u16, auth: &Auth, db: u32) -> String {
    EngineUrl {
        scheme: Scheme::Redis,
        user: auth.user.clone(),
        password: auth.password.clone(),
        host: host.to_string(),
        port: Some(port),
        db: Some(db),
    }
    .to_string()
}

/// A user and password of a url (either may be absent on a `url` engine).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Auth {
    pub user: Option<String>,
    pub password: Option<String>,
}

impl Auth {
    /// Who a `url` engine's url says (the harness makes no user there).
    pub fn of_url(url: &EngineUrl) -> Self {
        Self {
            user: url.user.clone(),
            password: url.password.clone(),
        }
    }
}

/// The two users of one engine, with their passwords.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Users {
    pub admin_password: String,
    pub connector_password: String,
    /// The engine's version when it is Redis (`None`: Valkey, which knows every command of
    /// SPEC's list); a Redis before 7.2 has no `CLIENT SETINFO` to grant.
    pub redis: Option<(u32, u32)>,
    /// The one database the connector's user may use (`db=`, Valkey 9.1+), on a cluster; every
    /// database otherwise.
    pub db: Option<u32>,
}

impl Users {
    /// Fresh random passwords, for an engine that is Redis `redis` (or Valkey: `None`).
    pub fn random(redis: Option<(u32, u32)>) -> Self {
        Self {
            admin_password: random_password(),
            connector_password: random_password(),
            redis,
            db: None,
        }
    }

    /// The same users, the connector's limited to database `db` (SPEC R8.5).
    pub fn only_db(mut self, db: u32) -> Self {
        self.db = Some(db);
        self
    }

    /// The harness's own user and password.
    pub fn admin(&self) -> Auth {
        Auth {
            user: Some(ADMIN_USER.into()),
            password: Some(self.admin_password.clone()),
        }
    }

    /// The user and password of the url a connector is given.
    pub fn connector(&self) -> Auth {
        Auth {
            user: Some(CONNECTOR_USER.into()),
            password: Some(self.connector_password.clone()),
        }
    }

    /// The server flags that make the users: `default` off, the admin, the connector's user.
    pub fn server_flags(&self) -> Vec<String> {
        let mut flags: Vec<String> = ["--user", "default", "off"].map(String::from).to_vec();
        flags.extend(
            [
                "--user",
                ADMIN_USER,
                "on",
                &format!(">{}", self.admin_password),
                "~*",
                "&*",
                "+@all",
            ]
            .map(String::from),
        );
        flags.extend(
            ["--user", CONNECTOR_USER, "on"]
                .map(String::from)
                .into_iter()
                .chain([format!(">{}", self.connector_password)]),
        );
        flags.extend(crate::protocol::commands::acl_rules(self.redis));
        flags.extend(self.db.map(|db| format!("db={db}")));
        flags
    }

    /// The ACL rules of the connector's user on a Sentinel: only what a client asks a Sentinel
    /// (Valkey's Sentinel client guide), so a connector can find the primary and follow a
    /// failover there but never steer the Sentinels (no `SENTINEL FAILOVER`, `SET`, `REMOVE`,
    /// `CONFIG`, no `ACL`, no `SHUTDOWN`):
    /// - the connection set-up it has on a data node ([`SENTINEL_CONNECTION`], as
    ///   `crate::protocol::commands` grants them for this engine), less `SELECT`, which a
    ///   Sentinel does not know (a rule naming it stops the Sentinel at start);
    /// - `SENTINEL get-master-addr-by-name` (the guide's step 2) and, on Valkey, its spelling
    ///   `get-primary-addr-by-name`, one command by two names (Redis does not know the second:
    ///   the rule would stop its Sentinel at start);
    /// - `SENTINEL sentinels` (the guide's refresh of the Sentinel list);
    /// - a subscription to [`SWITCH_CHANNEL`] alone (the guide's way to learn of a failover
    ///   at once), by `SUBSCRIBE` or by a `PSUBSCRIBE` of that very name: a pattern is checked
    ///   against `&` literally, so `PSUBSCRIBE *` is refused.
    ///
    /// Not `SENTINEL replicas`: a connector talks to the primary only (a replica's reads may be
    /// stale), so it has no replica to look up. Not `ROLE`: the guide asks it of the node a
    /// Sentinel names, not of the Sentinel. No key (a Sentinel holds none).
    pub fn sentinel_connector_rules(&self) -> Vec<String> {
        let mut rules: Vec<String> = ["resetkeys", "resetchannels"].map(String::from).to_vec();
        rules.push(format!("&{SWITCH_CHANNEL}"));
        rules.push("-@all".into());
        rules.extend(
            crate::protocol::commands::acl_rules(self.redis)
                .into_iter()
                .filter(|r| {
                    r.strip_prefix('+')
                        .is_some_and(|n| SENTINEL_CONNECTION.contains(&n))
                }),
        );
        rules.push("+sentinel|get-master-addr-by-name".into());
        if self.redis.is_none() {
            rules.push("+sentinel|get-primary-addr-by-name".into());
        }
        rules.extend(
            [
                "+sentinel|sentinels",
                "+subscribe",
                "+unsubscribe",
                "+psubscribe",
                "+punsubscribe",
            ]
            .map(String::from),
        );
        rules
    }

    /// A replica's flags: it authenticates to its primary as the admin user.
    pub fn replication_flags(&self) -> Vec<String> {
        [
            "--masteruser",
            ADMIN_USER,
            "--masterauth",
            &self.admin_password,
        ]
        .map(String::from)
        .to_vec()
    }

    /// `valkey-cli`'s flags to connect as the admin user.
    pub fn cli_flags(&self) -> Vec<String> {
        [
            "--user",
            ADMIN_USER,
            "--pass",
            &self.admin_password,
            "--no-auth-warning",
        ]
        .map(String::from)
        .to_vec()
    }
}

/// The Redis version a `--version` line names (`Redis server v=7.0.15 sha=...` → 7.0); `None`
/// for Valkey (or a line it cannot read: then every command is granted, as on Valkey).
pub fn redis_version(line: &str) -> Option<(u32, u32)> {
    let rest = line.trim().strip_prefix("Redis server v=")?;
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// [`redis_version`] of the server binary at `path` (`valkey-server --version`).
pub fn redis_version_of_binary(path: &Path) -> Option<(u32, u32)> {
    let out = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    redis_version(&String::from_utf8_lossy(&out.stdout))
}

/// The Redis version of a container image, from the labels `ci/provision` gives its local
/// builds (`org.echomq.redis-version`), else the OCI ones (a title `redis` and its version).
pub fn redis_version_of_image(image: &str) -> Option<(u32, u32)> {
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            "{{index .Config.Labels \"org.echomq.redis-version\"}}|{{index .Config.Labels \"org.opencontainers.image.title\"}}|{{index .Config.Labels \"org.opencontainers.image.version\"}}",
            image,
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    image_redis_version(&String::from_utf8_lossy(&out.stdout))
}

/// The pure half of [`redis_version_of_image`]: `"<redis-version>|<title>|<version>"`, where
/// an absent label reads `<no value>` or nothing.
pub fn image_redis_version(labels: &str) -> Option<(u32, u32)> {
    let fields: Vec<&str> = labels.trim().split('|').collect();
    let version = match fields.as_slice() {
        [own, ..] if own.starts_with(|c: char| c.is_ascii_digit()) => own,
        [_, "redis", version] => version,
        _ => return None,
    };
    redis_version(&format!("Redis server v={version}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_off_the_admin_holds_everything_and_the_connector_the_list() {
        let users = Users {
            admin_password: "a1".into(),
            connector_password: "c2".into(),
            redis: None,
            db: None,
        };
        let f = users.server_flags();
        assert_eq!(f[..3], ["--user", "default", "off"]);
        let admin = f.iter().position(|x| x == ADMIN_USER).unwrap();
        assert_eq!(
            f[admin..admin + 6],
            [ADMIN_USER, "on", ">a1", "~*", "&*", "+@all"]
        );
        let emq = f.iter().position(|x| x == CONNECTOR_USER).unwrap();
        assert_eq!(
            f[emq..emq + 6],
            [CONNECTOR_USER, "on", ">c2", "~*", "resetchannels", "-@all"]
        );
        assert!(f[emq..].contains(&"+evalsha".to_string()));
        assert!(!f[emq..].contains(&"+@all".to_string()));
        assert!(!f.iter().any(|x| x.starts_with("db=")));
        // On a cluster the connector's user gets one database, as its last rule.
        let f = users.clone().only_db(9).server_flags();
        assert_eq!(f.last().map(String::as_str), Some("db=9"));
        assert_eq!(
            users.replication_flags(),
            ["--masteruser", ADMIN_USER, "--masterauth", "a1"]
        );
    }

    #[test]
    fn a_redis_version_is_read_from_the_server_and_from_an_image() {
        assert_eq!(
            redis_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.2.1"),
            Some((7, 0))
        );
        assert_eq!(redis_version("Valkey server v=9.1.2 sha=00000000:1"), None);
        assert_eq!(redis_version(""), None);
        assert_eq!(image_redis_version("7.0.15|redis|7.0.15\n"), Some((7, 0)));
        assert_eq!(
            image_redis_version("<no value>|redis|7.2.4\n"),
            Some((7, 2))
        );
        assert_eq!(image_redis_version("<no value>|valkey|9.1.2\n"), None);
        assert_eq!(image_redis_version(""), None);
    }

    #[test]
    fn two_runs_get_two_pairs_of_passwords() {
        let (a, b) = (Users::random(None), Users::random(None));
        assert_ne!(a.admin_password, b.admin_password);
        assert_ne!(a.admin_password, a.connector_password);
    }
}
