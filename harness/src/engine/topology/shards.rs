//! `CLUSTER SHARDS` as a client reads it (SPEC P4.9, R10.4): each shard's slot ranges and
//! nodes, each node with the fields a client dials by. Pure, in both reply forms (RESP2's flat
//! `[key, value, ...]` arrays, RESP3's maps), and tolerant of keys it does not know (Valkey 9.1
//! adds a shard `id` and `availability-zone`; Redis 8 has neither).
//!
//! Which host to dial is the lesson of redis-cluster-client #515: `ip` is the address the node
//! binds, `endpoint` the one it tells clients to use (with `cluster-preferred-endpoint-type
//! hostname`, its host name; `?` when that is unknown, empty when the engine names none, meaning
//! the host the client already spoke to).

use redis::Value;

use super::Role;
use crate::engine::admin::shards::SlotRange;

/// One node of a shard, as `CLUSTER SHARDS` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardNode {
    pub role: Role,
    pub ip: String,
    /// `None` when the engine sent null.
    pub endpoint: Option<String>,
    pub hostname: Option<String>,
    /// The plaintext port, absent on a TLS-only node.
    pub port: Option<u16>,
    pub tls_port: Option<u16>,
}

impl ShardNode {
    /// The host a client dials: `endpoint`, or `hostname` where `endpoint` is `?`; `None` for
    /// an empty or null endpoint (the host the client already spoke to).
    pub fn host(&self) -> Option<&str> {
        match self.endpoint.as_deref() {
            Some("?") => self.hostname.as_deref().filter(|h| !h.is_empty()),
            Some("") | None => None,
            Some(e) => Some(e),
        }
    }

    /// The port a client dials: `tls-port` on TLS, else `port`.
    pub fn client_port(&self, tls: bool) -> Option<u16> {
        if tls { self.tls_port } else { self.port }
    }
}

/// One shard: its slot ranges (none for a shard that owns no slot) and its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub ranges: Vec<SlotRange>,
    pub nodes: Vec<ShardNode>,
}

impl Shard {
    /// Its primary, if it has one.
    pub fn primary(&self) -> Option<&ShardNode> {
        self.nodes.iter().find(|n| n.role == Role::Primary)
    }
}

/// Parses a `CLUSTER SHARDS` reply.
pub fn parse_shards(v: &Value) -> Result<Vec<Shard>, String> {
    let bad = |what: &str| format!("CLUSTER SHARDS answered an unexpected shape ({what}): {v:?}");
    let Value::Array(shards) = v else {
        return Err(bad("not an array"));
    };
    shards
        .iter()
        .map(|s| {
            let fields = pairs(s).ok_or_else(|| bad("a shard is not a map"))?;
            let slots = field(&fields, "slots").ok_or_else(|| bad("a shard has no slots"))?;
            let nodes = field(&fields, "nodes").ok_or_else(|| bad("a shard has no nodes"))?;
            let (Value::Array(slots), Value::Array(nodes)) = (slots, nodes) else {
                return Err(bad("slots or nodes is not an array"));
            };
            let bounds: Option<Vec<u16>> = slots.iter().map(int).collect();
            let bounds = bounds.ok_or_else(|| bad("a slot is not an integer"))?;
            if bounds.len() % 2 != 0 {
                return Err(bad("an odd number of slot bounds"));
            }
            let ranges = bounds.chunks(2).map(|b| (b[0], b[1])).collect();
            let nodes = nodes
                .iter()
                .map(|n| node(n).ok_or_else(|| bad("a node lacks role or ip")))
                .collect::<Result<_, _>>()?;
            Ok(Shard { ranges, nodes })
        })
        .collect()
}

fn node(v: &Value) -> Option<ShardNode> {
    let f = pairs(v)?;
    let port = |k: &str| field(&f, k).and_then(int);
    Some(ShardNode {
        role: Role::from_flags(&text(field(&f, "role")?)?),
        ip: text(field(&f, "ip")?)?,
        endpoint: field(&f, "endpoint").and_then(text),
        hostname: field(&f, "hostname").and_then(text),
        port: port("port"),
        tls_port: port("tls-port"),
    })
}

/// A map's entries, from either form.
fn pairs(v: &Value) -> Option<Vec<(String, &Value)>> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| Some((text(k)?, v))).collect(),
        Value::Array(a) if a.len() % 2 == 0 => a
            .chunks(2)
            .map(|kv| Some((text(&kv[0])?, &kv[1])))
            .collect(),
        _ => None,
    }
}

fn field<'a>(f: &[(String, &'a Value)], key: &str) -> Option<&'a Value> {
    f.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => Some(s.clone()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<u16> {
    match v {
        Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::BulkString(x.as_bytes().to_vec())
    }

    /// A node as Valkey 9.1's TLS cluster names it (`endpoint` the announced host name, no
    /// `port`), in RESP2's flat form.
    fn tls_node(role: &str, tls_port: i64, endpoint: Value) -> Value {
        Value::Array(vec![
            s("id"),
            s("abc"),
            s("tls-port"),
            Value::Int(tls_port),
            s("ip"),
            s("127.0.0.1"),
            s("endpoint"),
            endpoint,
            s("hostname"),
            s("localhost"),
            s("role"),
            s(role),
            s("availability-zone"),
            s(""),
        ])
    }

    #[test]
    fn a_tls_shard_names_its_host_and_tls_port() {
        let v = Value::Array(vec![Value::Array(vec![
            s("slots"),
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                Value::Int(6000),
                Value::Int(6001),
            ]),
            s("nodes"),
            Value::Array(vec![
                tls_node("replica", 7003, s("localhost")),
                tls_node(Role::Primary.word(), 7000, s("localhost")),
            ]),
            s("id"),
            s("shard-id"),
        ])]);
        let shards = parse_shards(&v).unwrap();
        assert_eq!(shards[0].ranges, vec![(0, 5460), (6000, 6001)]);
        let p = shards[0].primary().unwrap();
        assert_eq!((p.host(), p.ip.as_str()), (Some("localhost"), "127.0.0.1"));
        assert_eq!(
            (p.client_port(true), p.client_port(false)),
            (Some(7000), None)
        );
    }

    #[test]
    fn an_unknown_or_empty_endpoint_is_never_a_host() {
        let node = |e: Value| {
            parse_shards(&Value::Array(vec![Value::Array(vec![
                s("slots"),
                Value::Array(vec![]),
                s("nodes"),
                Value::Array(vec![tls_node(Role::Primary.word(), 1, e)]),
            ])]))
            .unwrap()[0]
                .nodes[0]
                .clone()
        };
        assert_eq!(node(s("?")).host(), Some("localhost"), "`?`: the hostname");
        assert_eq!(
            node(s("")).host(),
            None,
            "empty: the host already spoken to"
        );
        assert_eq!(node(Value::Nil).host(), None);
    }

    #[test]
    fn resp3_maps_read_as_resp2_arrays() {
        let flat = Value::Array(vec![
            s("slots"),
            Value::Array(vec![Value::Int(1), Value::Int(2)]),
            s("nodes"),
            Value::Array(vec![tls_node(Role::Primary.word(), 7000, s("localhost"))]),
        ]);
        let Value::Array(a) = &flat else {
            unreachable!()
        };
        let map = Value::Map(
            a.chunks(2)
                .map(|kv| (kv[0].clone(), kv[1].clone()))
                .collect(),
        );
        assert_eq!(
            parse_shards(&Value::Array(vec![flat.clone()])),
            parse_shards(&Value::Array(vec![map]))
        );
        assert!(parse_shards(&Value::Nil).is_err());
        assert!(parse_shards(&Value::Array(vec![s("x")])).is_err());
    }
}
