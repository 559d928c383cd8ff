//! A node's query connection with a short timeout, opened again after any error: for polling a
//! node that may not answer yet (a cluster's boot). Raw Redis, so it lives in the admin's seam.

use std::time::Duration;

pub struct Probe {
    url: String,
    timeout: Duration,
    con: Option<redis::Connection>,
}

impl Probe {
    pub fn new(url: String, timeout: Duration) -> Self {
        Self {
            url,
            timeout,
            con: None,
        }
    }

    /// The node's reply to `args` as text, or why there is none (the engine's error included).
    pub fn query(&mut self, args: &[&str]) -> Result<String, String> {
        let con = match &mut self.con {
            Some(con) => con,
            None => self.con.insert(self.open().map_err(|e| e.to_string())?),
        };
        let reply = super::command(args)
            .query::<String>(con)
            .map_err(|e| e.to_string());
        if reply.is_err() {
            self.con = None;
        }
        reply
    }

    /// Drops the connection: the next query opens a fresh one (a node restarted since).
    pub fn close(&mut self) {
        self.con = None;
    }

    fn open(&self) -> redis::RedisResult<redis::Connection> {
        let con =
            redis::Client::open(self.url.as_str())?.get_connection_with_timeout(self.timeout)?;
        con.set_read_timeout(Some(self.timeout))?;
        con.set_write_timeout(Some(self.timeout))?;
        Ok(con)
    }
}
