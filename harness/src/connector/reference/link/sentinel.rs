//! A session behind Sentinel (SPEC §11): the primary found by asking the Sentinels in order
//! (R11.1), checked with `ROLE` on the connection that will carry the session (R11.2), and found
//! afresh after a lost connection, a timeout or `READONLY` (R11.3). Part of the seam.
//!
//! Written here, not taken from the redis crate's `sentinel` module: that module finds the
//! primary with `SENTINEL MASTERS`, which a least-privilege Sentinel user does not hold (R11.4),
//! checks `ROLE` on a throw-away connection and then opens another (the check proves nothing
//! about the connection used), and never re-points a connection it handed out.

use std::time::Duration;

use redis::{ConnectionLike, ErrorKind as RedisKind, RedisResult, ServerErrorKind, Value};

use super::Dial;
use crate::engine::topology::view::Role;
use crate::protocol::sentinel::Sentinels;
use crate::protocol::url::EngineUrl;

/// How long one Sentinel may take to answer before the next is asked (R11.1): a share of the
/// request's 10 s (R5.8) small enough for three silent Sentinels to leave room for the primary.
const SENTINEL_WITHIN: Duration = Duration::from_secs(1);
/// How long a node a Sentinel named may take, from the dial (TLS and `AUTH` included) to its
/// `ROLE` reply, before the next Sentinel is asked (R11.1): three silent nodes named by three
/// slow Sentinels stay within R5.8's 10 s.
const NAMED_WITHIN: Duration = Duration::from_secs(2);
/// [`SentinelQuirks::no_named_timeout`]'s: a timeout for each reply, as the crate's set-up
/// reads them (`AUTH`, `SELECT`, two `CLIENT SETINFO`: a silent node costs four), so three
/// silent nodes outlast R5.8's 10 s.
const NAMED_AS_A_REPLY: Duration = Duration::from_secs(1);

/// The Sentinel departures a double asks for; all off in the reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SentinelQuirks {
    /// Uses the node a Sentinel names without asking it `ROLE` (breaks R11.2).
    pub no_role: bool,
    /// Asks the first Sentinel only (breaks R11.1).
    pub first_only: bool,
    /// Waits on a Sentinel as long as on the engine (breaks R11.1 on a silent Sentinel).
    pub no_sentinel_timeout: bool,
    /// Gives a node a Sentinel named a timeout for each reply, not one for its whole check
    /// (breaks R11.1 when every Sentinel names a silent node).
    pub no_named_timeout: bool,
    /// Reconnects to the address found at `connect`, never asking again (breaks R11.3).
    pub sticky: bool,
    /// Takes `READONLY` as the call's error only, keeping the connection (breaks R11.3).
    pub readonly_final: bool,
    /// Asks a Sentinel `SENTINEL MASTERS`, as redis-rs and redis-py do (breaks R11.4).
    pub masters: bool,
    /// Speaks plaintext to the Sentinels of a `rediss://` session (breaks R10.2; redis-py's
    /// `Sentinel` without TLS in `sentinel_kwargs`).
    pub plaintext: bool,
}

/// A session's connection to the primary the Sentinels named; the Sentinels and the quirks are
/// its `dial`'s.
pub(in crate::connector::reference) struct Primary {
    pub(super) con: redis::Connection,
    dial: Dial,
    timeout: Duration,
    /// Where the last discovery found the primary.
    at: (String, u16),
    /// The primary may have moved: the next call finds it again first (R11.3).
    pub(super) stale: bool,
}

impl Primary {
    /// Finds the primary (R11.1, R11.2) and connects to it; `None` when `dial` names no
    /// Sentinels.
    pub(super) fn open(dial: &Dial, timeout: Duration) -> Option<RedisResult<Self>> {
        let sentinels = dial.sentinel.as_ref()?;
        Some(discover(dial, sentinels, timeout).map(|(con, at)| Self {
            con,
            dial: dial.clone(),
            timeout,
            at,
            stale: false,
        }))
    }

    /// After a failed command (R11.3): a lost connection, a timeout or `READONLY` says the
    /// primary may have moved.
    pub(super) fn after_error(&mut self, e: &redis::RedisError) {
        let readonly = e.kind() == RedisKind::Server(ServerErrorKind::ReadOnly);
        if super::lost(e) || (readonly && !self.dial.sentinel_quirks.readonly_final) {
            self.stale = true;
        }
    }

    /// A fresh connection to the primary the Sentinels name now; the old one is closed as it
    /// is replaced. The caller reads the fence on it (R3.5).
    pub(super) fn reconnect(&mut self) -> RedisResult<()> {
        let sentinels = self
            .dial
            .sentinel
            .as_ref()
            .expect("a Primary's dial names Sentinels");
        let (con, at) = if self.dial.sentinel_quirks.sticky {
            let url = primary_url(&self.dial.url, &self.at.0, self.at.1)?;
            (self.dial.connection(&url, self.timeout)?, self.at.clone())
        } else {
            discover(&self.dial, sentinels, self.timeout)?
        };
        self.con = con;
        self.at = at;
        self.stale = false;
        Ok(())
    }
}

/// R11.1 and R11.2: each Sentinel in order, until one names a node that says it is the primary.
fn discover(
    dial: &Dial,
    sentinels: &Sentinels,
    timeout: Duration,
) -> RedisResult<(redis::Connection, (String, u16))> {
    let quirks = dial.sentinel_quirks;
    let addrs = sentinels
        .addrs()
        .map_err(|e| redis::RedisError::from((RedisKind::InvalidClientConfig, "sentinel", e)))?;
    let take = if quirks.first_only { 1 } else { addrs.len() };
    let mut why = Vec::new();
    for (host, port) in addrs.into_iter().take(take) {
        let named = ask(dial, &host, port, &sentinels.name, quirks, timeout);
        let (ph, pp) = match named {
            Ok(Some(at)) => at,
            Ok(None) => {
                why.push(format!("{host}:{port} knows no {:?}", sentinels.name));
                continue;
            }
            Err(e) => {
                why.push(format!("{host}:{port}: {e}"));
                continue;
            }
        };
        match checked(dial, &ph, pp, timeout, quirks) {
            Ok(con) => return Ok((con, (ph, pp))),
            Err(e) => why.push(format!("{host}:{port} named {ph}:{pp}: {e}")),
        }
    }
    Err(redis::RedisError::from((
        RedisKind::Io,
        "no Sentinel named a primary",
        why.join("; "),
    )))
}

/// One Sentinel's answer: the primary's host and port, or `None` when it knows no such name.
fn ask(
    dial: &Dial,
    host: &str,
    port: u16,
    name: &str,
    quirks: SentinelQuirks,
    timeout: Duration,
) -> RedisResult<Option<(String, u16)>> {
    // No database: a Sentinel has none, and the crate sends `SELECT` for any other than 0.
    let mut url = parse(&dial.url)?;
    url.host = host.to_string();
    url.port = Some(port);
    url.db = None;
    if quirks.plaintext {
        url.scheme = crate::protocol::url::Scheme::Redis;
    }
    let url = url.to_string();
    let (within, mut con) = if quirks.no_sentinel_timeout {
        // As long as a request may take (R5.8): no bound of a Sentinel's own.
        let within = crate::connector::child::DEFAULT_TIMEOUT.min(timeout);
        (
            within,
            dial.client(&url)?.get_connection_with_timeout(within)?,
        )
    } else {
        (SENTINEL_WITHIN, dial.bounded(&url, SENTINEL_WITHIN)?)
    };
    con.set_read_timeout(Some(within))?;
    con.set_write_timeout(Some(within))?;
    if quirks.masters {
        con.req_command(redis::cmd("SENTINEL").arg("MASTERS"))?
            .extract_error()?;
    }
    let reply = con
        .req_command(
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(name),
        )?
        .extract_error()?;
    if dial.permits.sentinel_extras {
        extras(&mut con, name)?;
    }
    let fields: Vec<String> = match reply {
        Value::Nil => return Ok(None),
        other => redis::from_redis_value(other)?,
    };
    match fields.as_slice() {
        [h, p] => Ok(p.parse().ok().map(|p| (h.clone(), p))),
        _ => Ok(None),
    }
}

/// What P11.1 lets a connector ask a Sentinel besides: its peers, the primary by its newer
/// name, and a subscription to `+switch-master` (left at once: this connection is closed next).
fn extras(con: &mut redis::Connection, name: &str) -> RedisResult<()> {
    con.req_command(redis::cmd("SENTINEL").arg("sentinels").arg(name))?
        .extract_error()?;
    con.req_command(
        redis::cmd("SENTINEL")
            .arg("get-primary-addr-by-name")
            .arg(name),
    )?
    .extract_error()?;
    let mut sub = con.as_pubsub();
    sub.subscribe(crate::engine::acl::SWITCH_CHANNEL)?;
    sub.unsubscribe(crate::engine::acl::SWITCH_CHANNEL)?;
    Ok(())
}

/// A connection to `host:port` that said `ROLE` `master` (R11.2), with the session's database
/// and, from then on, the session's timeouts. Until then the node has [`NAMED_WITHIN`] in all:
/// a silent one is skipped like a silent Sentinel (R11.1).
fn checked(
    dial: &Dial,
    host: &str,
    port: u16,
    timeout: Duration,
    quirks: SentinelQuirks,
) -> RedisResult<redis::Connection> {
    let url = primary_url(&dial.url, host, port)?;
    // The double's way: the crate's set-up, a timeout for each reply. Ours: one bound for all.
    let bound = (!quirks.no_named_timeout).then_some(NAMED_WITHIN.min(timeout));
    let start = std::time::Instant::now();
    let mut con = match bound {
        Some(within) => dial.connection_within(&url, within)?,
        None => dial.connection(&url, NAMED_AS_A_REPLY.min(timeout))?,
    };
    if !quirks.no_role {
        if let Some(within) = bound {
            let left = within.saturating_sub(start.elapsed());
            con.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        }
        let role = con.req_command(&redis::cmd("ROLE"))?.extract_error()?;
        let first = match &role {
            Value::Array(items) => items.first().and_then(super::super::text),
            _ => None,
        };
        if first.as_deref().and_then(Role::from_word) != Some(Role::Primary) {
            // Dropped: closed before anything else is sent on it.
            return Err(redis::RedisError::from((
                RedisKind::Io,
                "not the primary",
                format!("ROLE says {}", first.unwrap_or_else(|| format!("{role:?}"))),
            )));
        }
    }
    con.set_read_timeout(Some(timeout))?;
    con.set_write_timeout(Some(timeout))?;
    Ok(con)
}

/// The session's url (scheme, user, password, database) at the primary's `host:port`.
fn primary_url(url: &str, host: &str, port: u16) -> RedisResult<String> {
    let mut u = parse(url)?;
    u.host = host.to_string();
    Ok(u.with_port(port).to_string())
}

fn parse(url: &str) -> RedisResult<EngineUrl> {
    EngineUrl::parse(url).map_err(|e| {
        redis::RedisError::from((RedisKind::InvalidClientConfig, "bad url", e.to_string()))
    })
}
