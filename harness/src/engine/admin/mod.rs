//! The harness's own instrument on the engine: setup, observation and fault injection. It is the
//! second (and last) place the raw client may appear: it judges connectors, so it must not be one.
#![expect(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the harness's observer needs raw commands (MONITOR, INFO, CLIENT KILL, SCAN) that no \
              connector may send; keeping them here keeps them out of every connector"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Value;

use crate::error::HarnessError;
pub use crate::protocol::keyspace::KeyData;
use crate::protocol::keyspace::Keyspace;

pub mod acl_log;
mod clients;
mod monitor;
mod probe;
pub mod shards;
pub mod side;
mod subscription;

pub use clients::ClientInfo;
pub use monitor::Monitor;
pub use probe::Probe;
use shards::Shard;
pub use subscription::Subscription;

/// An admin connection to one database; on a cluster, to its seed node and to every primary,
/// each key routed to the primary that owns its slot and node-wide commands sent to each.
pub struct Admin {
    con: redis::Connection,
    url: String,
    /// The ACL user of `url` (`default` where it names none).
    user: String,
    /// A cluster's primaries (empty on a single engine).
    shards: Vec<Shard>,
}

pub(crate) fn err(e: redis::RedisError) -> HarnessError {
    HarnessError::Engine(e.to_string())
}

/// Opens one admin connection (5 s to connect, 120 s per reply) and proves it with `PING`.
fn open(url: &str) -> Result<redis::Connection, HarnessError> {
    let client = redis::Client::open(url).map_err(|e| HarnessError::EngineUrl(e.to_string()))?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| HarnessError::Unreachable(e.to_string()))?;
    con.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(err)?;
    redis::cmd("PING").query::<String>(&mut con).map_err(err)?;
    Ok(con)
}

fn command(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// Commands that name no key: on a cluster they go to the seed node, not by slot.
const NODE_COMMANDS: [&str; 14] = [
    "PING", "INFO", "CLIENT", "CONFIG", "SCRIPT", "FLUSHDB", "FLUSHALL", "DBSIZE", "TIME", "ECHO",
    "SCAN", "CLUSTER", "DEBUG", "FUNCTION",
];

impl Admin {
    /// Connects to a single engine.
    pub fn connect(url: &str) -> Result<Self, HarnessError> {
        Ok(Self {
            con: open(url)?,
            url: url.to_string(),
            user: crate::protocol::url::EngineUrl::parse(url)
                .ok()
                .and_then(|u| u.user)
                .unwrap_or_else(|| "default".to_string()),
            shards: Vec::new(),
        })
    }

    /// Connects to a cluster through its seed node at `url`, and to every primary that
    /// `CLUSTER SLOTS` names (`node_url` gives a node's url from its port).
    pub fn connect_cluster(
        url: &str,
        node_url: &dyn Fn(u16) -> String,
    ) -> Result<Self, HarnessError> {
        let mut a = Self::connect(url)?;
        a.shards = a.discover(node_url)?;
        Ok(a)
    }

    /// Reads the slot map again (after a failover) and reconnects to the primaries it names.
    /// The seed's own connection is opened again where its node closed it: a failover that
    /// killed the seed node and restarted it (G8's unclean kill, on seeds whose victim is the
    /// seed) left it at end of file.
    pub fn refresh(&mut self, node_url: &dyn Fn(u16) -> String) -> Result<(), HarnessError> {
        if self.shards.is_empty() {
            return Ok(());
        }
        self.shards = match self.discover(node_url) {
            Err(e) if crate::engine::ready::is_closed(&e) => {
                self.con = open(&self.url)?;
                self.discover(node_url)?
            }
            r => r?,
        };
        Ok(())
    }

    fn discover(&mut self, node_url: &dyn Fn(u16) -> String) -> Result<Vec<Shard>, HarnessError> {
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut self.con)
            .map_err(err)?;
        let map = shards::parse_cluster_slots(&slots).map_err(HarnessError::Engine)?;
        map.into_iter()
            .map(|(port, ranges, replicas)| {
                let url = node_url(port);
                Ok(Shard {
                    port,
                    con: open(&url)?,
                    url,
                    ranges,
                    replicas,
                })
            })
            .collect()
    }

    /// True when this admin serves a cluster.
    pub fn is_cluster(&self) -> bool {
        !self.shards.is_empty()
    }

    /// The primaries' ports (a cluster), in slot order; empty on a single engine.
    pub fn primaries(&self) -> Vec<u16> {
        self.shards.iter().map(|s| s.port).collect()
    }

    /// The index of the primary that owns `key`'s slot (0 on a single engine).
    pub fn shard_of(&self, key: &str) -> usize {
        shards::owner(&self.shards, shards::slot(key.as_bytes()))
    }

    /// Names `<prefix>-<i>`, the first that lands on each primary, in primary order (a queue
    /// `q`'s keys carry the tag `{q}`, so `q` alone gives their slot); `[prefix]` on a single
    /// engine. Gates use them to put work on every shard.
    pub fn one_name_per_primary(&self, prefix: &str) -> Vec<String> {
        if self.shards.is_empty() {
            return vec![prefix.to_string()];
        }
        let mut by_shard = BTreeMap::new();
        for i in 0..100_000 {
            let name = format!("{prefix}-{i}");
            by_shard.entry(self.shard_of(&name)).or_insert(name);
            if by_shard.len() == self.shards.len() {
                break;
            }
        }
        by_shard.into_values().collect()
    }

    /// `count` names: [`Admin::one_name_per_primary`] first (as many as `count` takes), then
    /// `<prefix>-more-<i>` to make up the number.
    pub fn names_over_primaries(&self, prefix: &str, count: usize) -> Vec<String> {
        let mut names = self.one_name_per_primary(prefix);
        names.truncate(count);
        let more = count.saturating_sub(names.len());
        names.extend((0..more).map(|i| format!("{prefix}-more-{i}")));
        names
    }

    /// The connection that serves `key`.
    fn for_key(&mut self, key: &str) -> &mut redis::Connection {
        if self.shards.is_empty() {
            return &mut self.con;
        }
        let i = self.shard_of(key);
        &mut self.shards[i].con
    }

    /// This node's `ACL LOG` (every entry the engine kept), then `ACL LOG RESET`, so the next
    /// read sees only what came after (SPEC R4.19). On a single connection: one node.
    pub fn acl_log_take(&mut self) -> Result<Vec<acl_log::AclLogEntry>, HarnessError> {
        let v: Value = redis::cmd("ACL")
            .arg("LOG")
            .query(&mut self.con)
            .map_err(err)?;
        let entries = acl_log::parse_acl_log(&v).map_err(HarnessError::Engine)?;
        redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query::<()>(&mut self.con)
            .map_err(err)?;
        Ok(entries)
    }

    /// Every node connection a node-wide command must reach: the primaries on a cluster, else
    /// the one connection.
    fn nodes_mut(&mut self) -> Vec<&mut redis::Connection> {
        if self.shards.is_empty() {
            vec![&mut self.con]
        } else {
            self.shards.iter_mut().map(|s| &mut s.con).collect()
        }
    }

    /// Any command, typed reply: routed by its first argument's slot on a cluster unless it is a
    /// node-wide command, which goes to the seed.
    pub fn query<T: redis::FromRedisValue>(&mut self, args: &[&str]) -> Result<T, HarnessError> {
        let keyless = NODE_COMMANDS.contains(&args[0].to_ascii_uppercase().as_str());
        let con = match args.get(1) {
            Some(k) if !keyless => self.for_key(k),
            _ => &mut self.con,
        };
        command(args).query(con).map_err(err)
    }

    /// The redirect this connection's node answers `args` with, in the engine's words (`MOVED
    /// <slot> <host>:<port>` or `ASK …`), or `None` where the node runs the command.
    pub fn redirect_for(&mut self, args: &[&str]) -> Result<Option<String>, HarnessError> {
        use redis::{ErrorKind, ServerErrorKind};
        let e = match command(args).query::<Value>(&mut self.con) {
            Ok(_) => return Ok(None),
            Err(e) => e,
        };
        let word = match e.kind() {
            ErrorKind::Server(ServerErrorKind::Moved) => "MOVED",
            ErrorKind::Server(ServerErrorKind::Ask) => "ASK",
            _ => return Err(err(e)),
        };
        let (addr, slot) = e.redirect_node().ok_or_else(|| err(e.clone()))?;
        Ok(Some(format!("{word} {slot} {addr}")))
    }

    /// A node-wide command on every node ([`Admin::query`] sends it to the seed only).
    pub fn query_each<T: redis::FromRedisValue>(
        &mut self,
        args: &[&str],
    ) -> Result<Vec<T>, HarnessError> {
        let c = command(args);
        self.nodes_mut()
            .into_iter()
            .map(|con| c.query(con).map_err(err))
            .collect()
    }

    /// `INFO <section>` as key → value.
    pub fn info(&mut self, section: &str) -> Result<BTreeMap<String, String>, HarnessError> {
        let text: String = self.query(&["INFO", section])?;
        Ok(parse_info(&text))
    }

    /// `INFO <section>` of every node (each primary of a cluster), in node order.
    pub fn info_each(
        &mut self,
        section: &str,
    ) -> Result<Vec<BTreeMap<String, String>>, HarnessError> {
        let texts: Vec<String> = self.query_each(&["INFO", section])?;
        Ok(texts.iter().map(|t| parse_info(t)).collect())
    }

    /// `valkey_version` from `INFO server`.
    pub fn valkey_version(&mut self) -> Result<String, HarnessError> {
        let info = self.info("server")?;
        info.get("valkey_version")
            .or_else(|| info.get("redis_version"))
            .cloned()
            .ok_or_else(|| HarnessError::Engine("INFO server has no valkey_version".into()))
    }

    /// Calls per command since the last `CONFIG RESETSTAT` (`script|load` style names), summed
    /// over every node ([`Admin::commandstats_each`] keeps them apart).
    pub fn commandstats(&mut self) -> Result<BTreeMap<String, u64>, HarnessError> {
        let mut sum = BTreeMap::new();
        for node in self.commandstats_each()? {
            for (k, v) in node {
                *sum.entry(k).or_default() += v;
            }
        }
        Ok(sum)
    }

    /// Calls per command of each node (each primary of a cluster), in node order.
    pub fn commandstats_each(&mut self) -> Result<Vec<BTreeMap<String, u64>>, HarnessError> {
        Ok(self
            .info_each("commandstats")?
            .iter()
            .map(|info| {
                info.iter()
                    .filter_map(|(k, v)| {
                        let name = k.strip_prefix("cmdstat_")?;
                        let calls = v
                            .split(',')
                            .find_map(|f| f.strip_prefix("calls="))?
                            .parse()
                            .ok()?;
                        Some((name.to_string(), calls))
                    })
                    .collect()
            })
            .collect())
    }

    /// Empties the database (every primary of a cluster).
    pub fn flushdb(&mut self) -> Result<(), HarnessError> {
        self.query_each::<()>(&["FLUSHDB"]).map(drop)
    }

    /// Keys in the database (summed over a cluster's primaries).
    pub fn dbsize(&mut self) -> Result<u64, HarnessError> {
        Ok(self.query_each::<u64>(&["DBSIZE"])?.into_iter().sum())
    }

    /// Every key of this database (SCAN on every node, so a big keyspace does not block it).
    pub fn keys(&mut self) -> Result<Vec<String>, HarnessError> {
        let mut out = Vec::new();
        for con in self.nodes_mut() {
            let mut cursor = "0".to_string();
            loop {
                let (next, batch): (String, Vec<String>) =
                    command(&["SCAN", &cursor, "COUNT", "1000"])
                        .query(con)
                        .map_err(err)?;
                out.extend(batch);
                if next == "0" {
                    break;
                }
                cursor = next;
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// A snapshot of every EchoMQ key of this database (two pipelined round trips).
    pub fn keyspace(&mut self) -> Result<Keyspace, HarnessError> {
        let keys = self.keys()?;
        let data = self.read_keys(&keys)?;
        Ok(Keyspace::from_keys(keys.into_iter().zip(data)))
    }

    /// Reads many keys in two pipelined round trips per node (types, then contents), so a
    /// snapshot of tens of thousands of keys costs two round trips, not two per key.
    pub fn read_keys(&mut self, keys: &[String]) -> Result<Vec<KeyData>, HarnessError> {
        if self.shards.is_empty() {
            return read_keys_on(&mut self.con, keys);
        }
        let mut by_shard: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            by_shard.entry(self.shard_of(k)).or_default().push(i);
        }
        let mut out: Vec<Option<KeyData>> = vec![None; keys.len()];
        for (shard, idx) in by_shard {
            let mine: Vec<String> = idx.iter().map(|&i| keys[i].clone()).collect();
            let data = read_keys_on(&mut self.shards[shard].con, &mine)?;
            for (i, d) in idx.into_iter().zip(data) {
                out[i] = Some(d);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    pub fn key_type(&mut self, key: &str) -> Result<String, HarnessError> {
        self.query(&["TYPE", key])
    }

    /// Members with integer scores, in set order.
    pub fn zrange_withscores(&mut self, key: &str) -> Result<Vec<(String, i64)>, HarnessError> {
        let flat: Vec<(String, f64)> = self.query(&["ZRANGE", key, "0", "-1", "WITHSCORES"])?;
        Ok(flat.into_iter().map(|(m, s)| (m, s as i64)).collect())
    }

    pub fn hgetall(&mut self, key: &str) -> Result<BTreeMap<String, String>, HarnessError> {
        self.query(&["HGETALL", key])
    }

    pub fn get(&mut self, key: &str) -> Result<Option<String>, HarnessError> {
        self.query(&["GET", key])
    }

    /// Sets hash fields (setup shortcuts such as a foreign fence; never queue state).
    pub fn hset(&mut self, key: &str, fields: &[(&str, &str)]) -> Result<(), HarnessError> {
        let mut args = vec!["HSET", key];
        for (f, v) in fields {
            args.push(f);
            args.push(v);
        }
        self.query::<()>(&args)
    }

    /// The engine's clock in ms (what scripts read through `TIME`).
    pub fn time_ms(&mut self) -> Result<i64, HarnessError> {
        let (s, us): (i64, i64) = self.query(&["TIME"])?;
        Ok(s * 1000 + us / 1000)
    }

    /// The earliest clock of every node (the one engine, or each primary of a cluster), in ms:
    /// the lower end of a bracket. A script runs on its key's primary, a different process from
    /// the seed's; reading each node makes the bracket hold even when their clocks disagree by
    /// a millisecond (seen once on a loaded cluster: a score 1 ms before the seed's `TIME`).
    pub fn time_ms_earliest(&mut self) -> Result<i64, HarnessError> {
        Ok(self
            .times_ms()?
            .into_iter()
            .min()
            .expect("an engine has a node"))
    }

    /// The latest clock of every node, in ms: the upper end of a bracket, and "now" for a
    /// due-time check (a later now is the cautious one).
    pub fn time_ms_latest(&mut self) -> Result<i64, HarnessError> {
        Ok(self
            .times_ms()?
            .into_iter()
            .max()
            .expect("an engine has a node"))
    }

    fn times_ms(&mut self) -> Result<Vec<i64>, HarnessError> {
        let t: Vec<(i64, i64)> = self.query_each(&["TIME"])?;
        Ok(t.into_iter().map(|(s, us)| s * 1000 + us / 1000).collect())
    }

    /// Empties the script cache (of every primary of a cluster).
    pub fn script_flush(&mut self) -> Result<(), HarnessError> {
        self.query_each::<()>(&["SCRIPT", "FLUSH"]).map(drop)
    }

    /// `SCRIPT LOAD` of exact bytes (on the seed node); returns the engine's SHA.
    pub fn script_load(&mut self, source: &[u8]) -> Result<String, HarnessError> {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query(&mut self.con)
            .map_err(err)
    }

    /// `SCRIPT LOAD` on every node (every primary of a cluster, else the one engine).
    pub fn script_load_each(&mut self, source: &[u8]) -> Result<(), HarnessError> {
        for con in self.nodes_mut() {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(source)
                .query::<String>(con)
                .map_err(err)?;
        }
        Ok(())
    }

    /// Zeroes the command statistics (of every primary of a cluster).
    pub fn config_resetstat(&mut self) -> Result<(), HarnessError> {
        self.query_each::<()>(&["CONFIG", "RESETSTAT"]).map(drop)
    }

    /// Starts a `MONITOR` on a connection of its own (of the seed node on a cluster).
    pub fn monitor(&self) -> Result<Monitor, HarnessError> {
        Monitor::start(&self.url)
    }

    /// One `MONITOR` per node: every primary of a cluster, else the one engine.
    pub fn monitors(&self) -> Result<Vec<Monitor>, HarnessError> {
        if self.shards.is_empty() {
            return Ok(vec![self.monitor()?]);
        }
        self.shards.iter().map(|s| Monitor::start(&s.url)).collect()
    }
}

/// `INFO`'s text as its fields (`name:value` lines; section headers and blanks dropped).
pub(crate) fn parse_info(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// [`Admin::read_keys`] on one node.
fn read_keys_on(
    con: &mut redis::Connection,
    keys: &[String],
) -> Result<Vec<KeyData>, HarnessError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut p = redis::pipe();
    for k in keys {
        p.add_command(redis::cmd("TYPE").arg(k).to_owned());
    }
    let types: Vec<String> = p.query(con).map_err(err)?;
    let mut p = redis::pipe();
    for (k, t) in keys.iter().zip(&types) {
        let c = match t.as_str() {
            "hash" => redis::cmd("HGETALL").arg(k).to_owned(),
            "zset" => redis::cmd("ZRANGE")
                .arg(k)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .to_owned(),
            "string" => redis::cmd("GET").arg(k).to_owned(),
            _ => redis::cmd("TYPE").arg(k).to_owned(),
        };
        p.add_command(c);
    }
    let values: Vec<Value> = p.query(con).map_err(err)?;
    keys.iter()
        .zip(types)
        .zip(values)
        .map(|((k, t), v)| {
            let bad = |e: redis::ParsingError| HarnessError::Engine(format!("{k}: {e}"));
            Ok(match t.as_str() {
                "hash" => KeyData::Hash(redis::from_redis_value(v).map_err(bad)?),
                "zset" => {
                    let flat: Vec<(String, f64)> = redis::from_redis_value(v).map_err(bad)?;
                    KeyData::ZSet(flat.into_iter().map(|(m, s)| (m, s as i64)).collect())
                }
                "string" => KeyData::String(redis::from_redis_value(v).map_err(bad)?),
                _ => KeyData::Other(t),
            })
        })
        .collect()
}
