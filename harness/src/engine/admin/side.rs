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
    probe: super::Probe,
    failed: bool,
}

impl SideReader {
    pub fn new(url: String, timeout: Duration) -> Self {
        Self {
            probe: super::Probe::new(url, timeout),
            failed: false,
        }
    }

    /// Lets the next read connect again.
    pub fn reopen(&mut self) {
        self.failed = false;
        self.probe.close();
    }

    /// The node's `master_replid` and `master_repl_offset` now, if it answers.
    pub fn position(&mut self) -> Option<ReplPosition> {
        if self.failed {
            return None;
        }
        let r = (self.probe.query(&["INFO", "replication"]).ok()).and_then(|t| parse_position(&t));
        self.failed = r.is_none();
        r
    }
}

/// `master_replid` and `master_repl_offset` of `INFO replication` text.
pub fn parse_position(text: &str) -> Option<ReplPosition> {
    let info = super::parse_info(text);
    Some(ReplPosition {
        replid: info.get("master_replid")?.clone(),
        offset: info.get("master_repl_offset")?.parse().ok()?,
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
