//! A side connection that reads one node's replication position, for G8's unclean failover
//! (SPEC R8.10): raw Redis, so it lives in the admin's seam.

use std::time::Duration;

/// A node's replication stream position (`INFO replication`): its history id and offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplPosition {
    pub replid: String,
    pub offset: u64,
}

/// A side connection to one node that reads its replication position after each acknowledged
/// call (an upper bound of the call's own position), with a short read timeout: a node that is
/// dead or stopped gives no position, never a wait. Once it fails it stays closed until
/// [`SideReader::reopen`].
pub struct SideReader {
    url: String,
    timeout: Duration,
    con: Option<redis::Connection>,
    failed: bool,
}

impl SideReader {
    pub fn new(url: String, timeout: Duration) -> Self {
        Self {
            url,
            timeout,
            con: None,
            failed: false,
        }
    }

    /// Lets the next read connect again.
    pub fn reopen(&mut self) {
        self.failed = false;
        self.con = None;
    }

    /// The node's `master_replid` and `master_repl_offset` now, if it answers.
    pub fn position(&mut self) -> Option<ReplPosition> {
        if self.failed {
            return None;
        }
        let r = self.read();
        if r.is_none() {
            self.failed = true;
            self.con = None;
        }
        r
    }

    fn read(&mut self) -> Option<ReplPosition> {
        if self.con.is_none() {
            let client = redis::Client::open(self.url.as_str()).ok()?;
            let con = client.get_connection_with_timeout(self.timeout).ok()?;
            con.set_read_timeout(Some(self.timeout)).ok()?;
            con.set_write_timeout(Some(self.timeout)).ok()?;
            self.con = Some(con);
        }
        let con = self.con.as_mut()?;
        let text: String = redis::cmd("INFO").arg("replication").query(con).ok()?;
        parse_position(&text)
    }
}

/// `master_replid` and `master_repl_offset` of `INFO replication` text.
pub fn parse_position(text: &str) -> Option<ReplPosition> {
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(k)?.strip_prefix(':'))
            .map(str::trim)
    };
    Some(ReplPosition {
        replid: get("master_replid")?.to_string(),
        offset: get("master_repl_offset")?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_position_is_the_replid_and_the_offset() {
        let text = "# Replication\r\nrole:master\r\nmaster_replid:abc\r\nmaster_replid2:0000\r\nmaster_repl_offset:1234\r\nsecond_repl_offset:-1\r\n";
        let p = super::parse_position(text).unwrap();
        assert_eq!((p.replid.as_str(), p.offset), ("abc", 1234));
        assert!(super::parse_position("role:master").is_none());
    }
}
