//! The harness's own instrument on the engine: setup, observation and fault injection. It is the
//! second (and last) place the raw client may appear: it judges connectors, so it must not be one.
#![expect(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the harness's observer needs raw commands (MONITOR, INFO, CLIENT KILL, SCAN) that no \
              connector may send; keeping them here keeps them out of every connector"
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use redis::Value;

use crate::error::HarnessError;

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
pub struct Monitor {
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub client_id: u64,
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
        con.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(err)?;
        // The first reply is +OK; MONITOR lines follow.
        let ok = con.recv_response().map_err(err)?;
        if ok != Value::Okay && ok != Value::SimpleString("OK".into()) {
            return Err(HarnessError::Engine(format!("MONITOR answered {ok:?}")));
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l2, s2) = (lines.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut idle_after_stop = 0;
            loop {
                match con.recv_response() {
                    Ok(Value::SimpleString(s)) => {
                        idle_after_stop = 0;
                        l2.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                    }
                    Ok(Value::Okay) => {}
                    Ok(_) => {}
                    Err(e) if e.is_timeout() => {
                        if s2.load(Ordering::SeqCst) {
                            idle_after_stop += 1;
                            if idle_after_stop >= 2 {
                                return;
                            }
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        Ok(Self {
            lines,
            stop,
            thread: Some(thread),
            client_id,
        })
    }

    /// Lines seen so far (and keeps monitoring).
    pub fn snapshot(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops after the engine goes quiet (so the last commands are seen) and returns every line.
    pub fn stop(mut self) -> Vec<String> {
        self.finish();
        std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.finish();
    }
}
