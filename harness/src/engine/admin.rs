//! The harness's own instrument on the engine: setup, observation and fault injection. It is the
//! second (and last) place the raw client may appear: it judges connectors, so it must not be one.
#![expect(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the harness's observer needs raw commands (MONITOR, INFO, CLIENT KILL, SCAN) that no \
              connector may send; keeping them here keeps them out of every connector"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use redis::Value;

use crate::error::HarnessError;
pub use crate::protocol::keyspace::KeyData;
use crate::protocol::keyspace::Keyspace;

/// An admin connection to one database.
pub struct Admin {
    con: redis::Connection,
    url: String,
}

/// One line of `CLIENT LIST`.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub db: u32,
    pub name: String,
    pub cmd: String,
    pub tot_net_in: u64,
}

fn err(e: redis::RedisError) -> HarnessError {
    HarnessError::Engine(e.to_string())
}

impl Admin {
    /// Connects (5 s timeout) and proves the connection with `PING`.
    pub fn connect(url: &str) -> Result<Self, HarnessError> {
        let client = redis::Client::open(url)
            .map_err(|e| HarnessError::BadInput(format!("engine url: {e}")))?;
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .map_err(|e| HarnessError::Engine(format!("cannot reach the engine: {e}")))?;
        con.set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(err)?;
        let mut a = Self {
            con,
            url: url.to_string(),
        };
        a.query::<String>(&["PING"])?;
        Ok(a)
    }

    /// Any command, typed reply.
    pub fn query<T: redis::FromRedisValue>(&mut self, args: &[&str]) -> Result<T, HarnessError> {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.con).map_err(err)
    }

    /// `INFO <section>` as key → value.
    pub fn info(&mut self, section: &str) -> Result<BTreeMap<String, String>, HarnessError> {
        let text: String = self.query(&["INFO", section])?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect())
    }

    /// `valkey_version` from `INFO server`.
    pub fn valkey_version(&mut self) -> Result<String, HarnessError> {
        let info = self.info("server")?;
        info.get("valkey_version")
            .or_else(|| info.get("redis_version"))
            .cloned()
            .ok_or_else(|| HarnessError::Engine("INFO server has no valkey_version".into()))
    }

    /// Calls per command since the last `CONFIG RESETSTAT` (`script|load` style names).
    pub fn commandstats(&mut self) -> Result<BTreeMap<String, u64>, HarnessError> {
        let info = self.info("commandstats")?;
        Ok(info
            .iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix("cmdstat_")?;
                let calls = v
                    .split(',')
                    .find_map(|f| f.strip_prefix("calls="))?
                    .parse()
                    .ok()?;
                Some((name.to_string(), calls))
            })
            .collect())
    }

    pub fn flushdb(&mut self) -> Result<(), HarnessError> {
        self.query::<()>(&["FLUSHDB"])
    }

    pub fn dbsize(&mut self) -> Result<u64, HarnessError> {
        self.query(&["DBSIZE"])
    }

    /// Every key of this database (SCAN, so a big keyspace does not block the engine).
    pub fn keys(&mut self) -> Result<Vec<String>, HarnessError> {
        let mut cursor = "0".to_string();
        let mut out = Vec::new();
        loop {
            let (next, batch): (String, Vec<String>) =
                self.query(&["SCAN", &cursor, "COUNT", "1000"])?;
            out.extend(batch);
            if next == "0" {
                break;
            }
            cursor = next;
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

    /// Reads many keys in two pipelined round trips (types, then contents), so a snapshot of
    /// tens of thousands of keys costs two round trips, not two per key.
    pub fn read_keys(&mut self, keys: &[String]) -> Result<Vec<KeyData>, HarnessError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut p = redis::pipe();
        for k in keys {
            p.add_command(redis::cmd("TYPE").arg(k).to_owned());
        }
        let types: Vec<String> = p.query(&mut self.con).map_err(err)?;
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
        let values: Vec<Value> = p.query(&mut self.con).map_err(err)?;
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

    pub fn script_flush(&mut self) -> Result<(), HarnessError> {
        self.query::<()>(&["SCRIPT", "FLUSH"])
    }

    /// `SCRIPT LOAD` of exact bytes; returns the engine's SHA.
    pub fn script_load(&mut self, source: &[u8]) -> Result<String, HarnessError> {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query(&mut self.con)
            .map_err(err)
    }

    pub fn config_resetstat(&mut self) -> Result<(), HarnessError> {
        self.query::<()>(&["CONFIG", "RESETSTAT"])
    }

    /// This connection's client id.
    pub fn client_id(&mut self) -> Result<u64, HarnessError> {
        self.query(&["CLIENT", "ID"])
    }

    /// Every client of the engine.
    pub fn client_list(&mut self) -> Result<Vec<ClientInfo>, HarnessError> {
        let text: String = self.query(&["CLIENT", "LIST"])?;
        Ok(text.lines().map(parse_client).collect())
    }

    /// Kills one client connection (crash injection).
    pub fn client_kill(&mut self, id: u64) -> Result<(), HarnessError> {
        let _: Value = self.query(&["CLIENT", "KILL", "ID", &id.to_string()])?;
        Ok(())
    }

    /// Starts a `MONITOR` on a connection of its own.
    pub fn monitor(&self) -> Result<Monitor, HarnessError> {
        Monitor::start(&self.url)
    }
}

fn parse_client(line: &str) -> ClientInfo {
    let mut c = ClientInfo::default();
    for field in line.split(' ') {
        let Some((k, v)) = field.split_once('=') else {
            continue;
        };
        match k {
            "id" => c.id = v.parse().unwrap_or(0),
            "addr" => c.addr = v.to_string(),
            "db" => c.db = v.parse().unwrap_or(0),
            "name" => c.name = v.to_string(),
            "cmd" => c.cmd = v.to_string(),
            "tot-net-in" => c.tot_net_in = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    c
}

/// A running `MONITOR`: raw lines collected on a thread until [`Monitor::stop`].
///
/// The reader blocks (no short read timeout: after a timed-out read the redis client drops the
/// next reply, which would silently lose a line). `stop` sends an end marker through a connection
/// of its own and the reader ends when the marker arrives, so every line sent before `stop` is
/// seen, or `stop` says the stream broke.
pub struct Monitor {
    lines: Arc<Mutex<Vec<String>>>,
    broken: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
    url: String,
    pub client_id: u64,
}

/// Longest silence the reader tolerates before calling the stream broken.
const MONITOR_SILENCE: Duration = Duration::from_secs(300);

fn marker(id: u64) -> String {
    format!("emq-monitor-end-{id}")
}

impl Monitor {
    fn start(url: &str) -> Result<Self, HarnessError> {
        let client = redis::Client::open(url)
            .map_err(|e| HarnessError::BadInput(format!("engine url: {e}")))?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .map_err(err)?;
        let client_id: u64 = redis::cmd("CLIENT")
            .arg("ID")
            .query(&mut con)
            .map_err(err)?;
        let packed = redis::cmd("MONITOR").get_packed_command();
        con.send_packed_command(&packed).map_err(err)?;
        con.set_read_timeout(Some(MONITOR_SILENCE)).map_err(err)?;
        let ok = con.recv_response().map_err(err)?;
        if ok != Value::Okay && ok != Value::SimpleString("OK".into()) {
            return Err(HarnessError::Engine(format!("MONITOR answered {ok:?}")));
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let broken = Arc::new(Mutex::new(None));
        let (l2, b2) = (lines.clone(), broken.clone());
        let end = marker(client_id);
        let thread = std::thread::spawn(move || {
            loop {
                match con.recv_response() {
                    Ok(Value::SimpleString(s)) => {
                        let done = s.contains(&end);
                        l2.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                        if done {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        *b2.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                        return;
                    }
                }
            }
        });
        Ok(Self {
            lines,
            broken,
            thread: Some(thread),
            url: url.to_string(),
            client_id,
        })
    }

    /// Lines seen so far (and keeps monitoring).
    pub fn snapshot(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sends the end marker, waits for it, and returns every line (the marker line last).
    pub fn stop(mut self) -> Result<Vec<String>, HarnessError> {
        self.finish()?;
        Ok(std::mem::take(
            &mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()),
        ))
    }

    fn finish(&mut self) -> Result<(), HarnessError> {
        let Some(t) = self.thread.take() else {
            return Ok(());
        };
        let sent = Admin::connect(&self.url)
            .and_then(|mut a| a.query::<String>(&["ECHO", &marker(self.client_id)]));
        if let Err(e) = sent {
            // Without the marker the reader would wait out its silence bound: end it instead.
            let _ = Admin::connect(&self.url).and_then(|mut a| a.client_kill(self.client_id));
            let _ = t.join();
            return Err(e);
        }
        let _ = t.join();
        match self.broken.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(why) => Err(HarnessError::Engine(format!("MONITOR stream broke: {why}"))),
            None => Ok(()),
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
