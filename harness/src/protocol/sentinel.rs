//! A Sentinel deployment as `connect` names it (SPEC R11.1): the name the Sentinels monitor the
//! primary by, and each Sentinel's `host:port` in the order a connector asks them. Pure.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `connect`'s `sentinel` (SPEC R11.1); absent on every other engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Sentinels {
    /// The name the Sentinels monitor the primary by (`SENTINEL get-master-addr-by-name`).
    pub name: String,
    /// Every Sentinel's `host:port`, in the order to ask them; the url names the first.
    pub nodes: Vec<String>,
}

impl Sentinels {
    /// Each Sentinel's host and port; an error names the first that is no `host:port`.
    pub fn addrs(&self) -> Result<Vec<(String, u16)>, String> {
        if self.nodes.is_empty() {
            return Err("sentinel names no Sentinel (nodes is empty)".into());
        }
        if self.name.is_empty() {
            return Err("sentinel names no primary (name is empty)".into());
        }
        self.nodes
            .iter()
            .map(|n| {
                n.rsplit_once(':')
                    .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
                    .filter(|(h, p)| !h.is_empty() && *p != 0)
                    .map(|(h, p)| (h.to_string(), p))
                    .ok_or_else(|| format!("sentinel node {n:?} is not host:port"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_host_and_port_and_anything_else_is_named() {
        let s = Sentinels {
            name: "emq".into(),
            nodes: vec!["127.0.0.1:26001".into(), "localhost:7".into()],
        };
        assert_eq!(
            s.addrs(),
            Ok(vec![("127.0.0.1".into(), 26001), ("localhost".into(), 7)])
        );
        for bad in ["h", "h:", ":1", "h:x", "h:0", "h:70000"] {
            let s = Sentinels {
                name: "emq".into(),
                nodes: vec![bad.into()],
            };
            assert_eq!(
                s.addrs(),
                Err(format!("sentinel node {bad:?} is not host:port"))
            );
        }
        let none = Sentinels {
            name: "emq".into(),
            nodes: vec![],
        };
        assert!(none.addrs().is_err());
        let unnamed = Sentinels {
            name: String::new(),
            nodes: vec!["h:1".into()],
        };
        assert!(unnamed.addrs().is_err());
    }
}
