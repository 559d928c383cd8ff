//! L1, the key grammar (SPEC §1): queue names, keys, job ids, and parsing keys back.

use crate::error::ConnectorError;

/// The one key outside any queue.
pub const FENCE_KEY: &str = "emq:fence";

/// One of a queue's four sorted sets; a job's `state` names the set that holds it (SPEC §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Set {
    Pending,
    Active,
    Delayed,
    Dead,
}

impl Set {
    /// The four sets, in the order records print them.
    pub const ALL: [Set; 4] = [Set::Pending, Set::Active, Set::Delayed, Set::Dead];

    /// The set's name: the key suffix and the job `state` value.
    pub fn name(self) -> &'static str {
        match self {
            Set::Pending => "pending",
            Set::Active => "active",
            Set::Delayed => "delayed",
            Set::Dead => "dead",
        }
    }

    /// The set a `state` value names.
    pub fn from_name(s: &str) -> Option<Set> {
        Set::ALL.into_iter().find(|set| set.name() == s)
    }
}

impl std::fmt::Display for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Rejects a queue name before a byte is sent: 1–128 chars of `[A-Za-z0-9._-]`.
pub fn validate_queue(q: &str) -> Result<(), ConnectorError> {
    let ok = (1..=128).contains(&q.len())
        && q.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ConnectorError::invalid(format!(
            "queue name {q:?} must be 1-128 chars of [A-Za-z0-9._-]"
        )))
    }
}

/// Rejects anything but a branded id: `j` and 16 decimal digits.
pub fn validate_id(id: &str) -> Result<(), ConnectorError> {
    if is_job_id(id) {
        Ok(())
    } else {
        Err(ConnectorError::invalid(format!(
            "job id {id:?} must be j followed by 16 digits"
        )))
    }
}

/// True for `j` followed by exactly 16 ASCII digits.
pub fn is_job_id(id: &str) -> bool {
    id.len() == 17 && id.starts_with('j') && id[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The job id minted from counter value `n`.
pub fn job_id(n: u64) -> String {
    format!("j{n:016}")
}

/// `emq:{q}:<kind>` for a set or the counter.
pub fn key(q: &str, kind: &str) -> String {
    format!("emq:{{{q}}}:{kind}")
}

/// The job-hash root `emq:{q}:job:` passed as `ARGV[1]`.
pub fn job_root(q: &str) -> String {
    format!("emq:{{{q}}}:job:")
}

/// What a key of an EchoMQ database is, by the grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedKey {
    Fence,
    Set { queue: String, set: Set },
    Seq { queue: String },
    Job { queue: String, id: String },
}

/// Parses a key by §3; `None` when it does not belong to EchoMQ's grammar.
pub fn parse_key(k: &str) -> Option<ParsedKey> {
    if k == FENCE_KEY {
        return Some(ParsedKey::Fence);
    }
    let rest = k.strip_prefix("emq:{")?;
    let close = rest.find('}')?;
    let queue = &rest[..close];
    validate_queue(queue).ok()?;
    let tail = rest[close + 1..].strip_prefix(':')?;
    let queue = queue.to_string();
    if tail == "seq" {
        return Some(ParsedKey::Seq { queue });
    }
    if let Some(id) = tail.strip_prefix("job:") {
        return is_job_id(id).then(|| ParsedKey::Job {
            queue,
            id: id.to_string(),
        });
    }
    Set::from_name(tail).map(|set| ParsedKey::Set { queue, set })
}

/// The Valkey cluster hash slot of a key (CRC16/XMODEM of the hash tag, mod 16384).
pub fn hash_slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let tagged = b.iter().position(|&c| c == b'{').and_then(|open| {
        let close = b[open + 1..].iter().position(|&c| c == b'}')?;
        (close > 0).then(|| &b[open + 1..open + 1 + close])
    });
    crc16(tagged.unwrap_or(b)) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        assert!(validate_queue("orders.v1-x_2").is_ok());
        assert!(validate_queue("").is_err());
        assert!(validate_queue(&"a".repeat(129)).is_err());
        assert!(validate_queue(&"a".repeat(128)).is_ok());
        assert!(validate_queue("a b").is_err());
        assert!(validate_queue("a{b}").is_err());
        assert!(validate_queue("é").is_err());
    }

    #[test]
    fn keys_round_trip() {
        assert_eq!(key("q", "pending"), "emq:{q}:pending");
        assert_eq!(
            parse_key("emq:{q}:job:j0000000000000001"),
            Some(ParsedKey::Job {
                queue: "q".into(),
                id: "j0000000000000001".into()
            })
        );
        assert_eq!(
            parse_key("emq:{q}:seq"),
            Some(ParsedKey::Seq { queue: "q".into() })
        );
        assert_eq!(parse_key("emq:fence"), Some(ParsedKey::Fence));
        assert_eq!(parse_key("emq:{q}:job:x"), None);
        assert_eq!(parse_key("emq:{q}:other"), None);
        assert_eq!(parse_key("probe"), None);
        assert_eq!(job_id(1), "j0000000000000001");
    }

    #[test]
    fn slots_follow_hash_tags() {
        // Reference values from the cluster spec: "123456789" -> 0x31C3.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(
            hash_slot("emq:{q}:pending"),
            hash_slot("emq:{q}:job:j0000000000000001")
        );
        assert_eq!(hash_slot("foo{}bar"), crc16(b"foo{}bar") % 16384);
    }
}
