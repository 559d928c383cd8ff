//! The running `MONITOR` of one node (part of the harness's instrument, so the raw client is
//! allowed here by the parent module's `#[expect]`).

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use redis::Value;

use super::{Admin, err};
use crate::error::HarnessError;

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
    /// Its connection's address, as the engine names it in `MONITOR` lines.
    pub addr: String,
}

/// Longest silence the reader tolerates before calling the stream broken.
const MONITOR_SILENCE: Duration = Duration::from_secs(300);

fn marker(id: u64) -> String {
    format!("emq-monitor-end-{id}")
}

impl Monitor {
    pub(super) fn start(url: &str) -> Result<Self, HarnessError> {
        let client =
            redis::Client::open(url).map_err(|e| HarnessError::EngineUrl(e.to_string()))?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .map_err(err)?;
        let client_id: u64 = redis::cmd("CLIENT")
            .arg("ID")
            .query(&mut con)
            .map_err(err)?;
        let info: String = redis::cmd("CLIENT")
            .arg("INFO")
            .query(&mut con)
            .map_err(err)?;
        let addr = super::clients::parse_client(info.trim()).addr;
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
            addr,
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
            let _ = Admin::connect(&self.url).and_then(|mut a| {
                a.query::<Value>(&["CLIENT", "KILL", "ID", &self.client_id.to_string()])
            });
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
