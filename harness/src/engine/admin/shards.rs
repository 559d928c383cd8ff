//! A cluster's slot map as the admin sees it: which primary owns which slots (pure, apart from the
//! connections each [`Shard`] holds).

use redis::Value;

/// An inclusive range of slots.
pub type SlotRange = (u16, u16);

/// Each primary's port, slot ranges and replicas' ports.
pub type SlotMap = Vec<(u16, Vec<SlotRange>, Vec<u16>)>;

/// One primary of a cluster and the admin's connection to it.
pub struct Shard {
    pub port: u16,
    pub url: String,
    pub con: redis::Connection,
    pub ranges: Vec<SlotRange>,
    /// The ports of its replicas.
    pub replicas: Vec<u16>,
}

/// A hash slot (0..16 384): a number of its own, never a port.
pub type Slot = u16;

/// The slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key, mod 16 384): the
/// cluster's own rule, so the admin can route a key without asking the engine.
pub fn slot(key: &[u8]) -> Slot {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % 16_384
}

/// True when one of `ranges` holds `slot`.
pub fn holds(ranges: &[SlotRange], slot: u16) -> bool {
    ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&slot))
}

/// The index of the shard whose ranges hold `slot` (0 when none does, or on a single engine).
pub fn owner(shards: &[Shard], slot: u16) -> usize {
    shards
        .iter()
        .position(|s| holds(&s.ranges, slot))
        .unwrap_or(0)
}

/// `CLUSTER SLOTS` as (primary port, its ranges, its replicas' ports), one entry per primary,
/// ordered by first slot.
pub fn parse_cluster_slots(v: &Value) -> Result<SlotMap, String> {
    let bad = || format!("CLUSTER SLOTS answered an unexpected shape: {v:?}");
    let Value::Array(entries) = v else {
        return Err(bad());
    };
    let int = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    let port_of = |node: &Value| match node {
        Value::Array(f) if f.len() >= 2 => int(&f[1]),
        _ => None,
    };
    let mut out: SlotMap = Vec::new();
    for e in entries {
        let Value::Array(f) = e else {
            return Err(bad());
        };
        if f.len() < 3 {
            return Err(bad());
        }
        let (lo, hi) = (int(&f[0]).ok_or_else(bad)?, int(&f[1]).ok_or_else(bad)?);
        let primary = port_of(&f[2]).ok_or_else(bad)?;
        let replicas: Vec<u16> = f[3..].iter().filter_map(port_of).collect();
        match out.iter_mut().find(|(p, _, _)| *p == primary) {
            Some((_, ranges, _)) => ranges.push((lo, hi)),
            None => out.push((primary, vec![(lo, hi)], replicas)),
        }
    }
    for (_, ranges, _) in &mut out {
        ranges.sort();
    }
    out.sort_by_key(|(_, ranges, _)| ranges[0]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn slots_follow_the_hash_tag() {
        // Values from `CLUSTER KEYSLOT` on Valkey 9.1.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{foo}bar"), 12182);
        assert_eq!(slot(b"emq:{orders}:pending"), slot(b"orders"));
        assert_eq!(
            slot(b"{}x"),
            slot(b"{}x"),
            "an empty tag hashes the whole key"
        );
        assert_ne!(slot(b"{}x"), slot(b""));
    }

    #[test]
    fn cluster_slots_group_by_primary() {
        let v = Value::Array(vec![
            Value::Array(vec![
                Value::Int(10923),
                Value::Int(16383),
                node(7002),
                node(7005),
            ]),
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node(7000),
                node(7003),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node(7001),
                node(7004),
            ]),
        ]);
        let map = parse_cluster_slots(&v).unwrap();
        assert_eq!(
            map,
            vec![
                (7000, vec![(0, 5460)], vec![7003]),
                (7001, vec![(5461, 10922)], vec![7004]),
                (7002, vec![(10923, 16383)], vec![7005]),
            ]
        );
        assert!(parse_cluster_slots(&Value::Nil).is_err());
    }
}
