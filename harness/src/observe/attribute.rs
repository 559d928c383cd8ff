//! Attribution, pure: which parsed `MONITOR` lines are the connector's, and which commands each
//! of its script calls ran.

use std::collections::{BTreeMap, BTreeSet};

use crate::observe::line::{Line, parse_line};
use crate::protocol::bundle::sha1_hex;

/// One script call from a connector connection, with the commands it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCall {
    pub client: String,
    /// The SHA sent (`EVALSHA`), or the sha1 of the body (`EVAL`).
    pub sha: String,
    /// True when the call was `EVAL` with the source.
    pub eval: bool,
    pub keys: Vec<String>,
    pub argv: Vec<String>,
    /// Commands run inside the script (`lua` lines), each with its arguments.
    pub inner: Vec<Vec<String>>,
}

/// One thing a connector connection did, in engine order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A plain command (including `EVALSHA`/`EVAL`, also listed as a [`Event::Script`] right after).
    Command { client: String, args: Vec<String> },
    /// The script call of the preceding `EVALSHA`/`EVAL` command, with its inner commands.
    Script(ScriptCall),
}

/// What the connector's connections did during a watch.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Plain commands per client address, in order (script calls included as their command).
    pub commands: BTreeMap<String, Vec<Vec<String>>>,
    /// Script calls, in engine order.
    pub scripts: Vec<ScriptCall>,
    /// Lines that did not parse (should be none).
    pub unparsed: Vec<String>,
    /// `lua` lines of the database that followed no connector script call.
    pub stray_lua: usize,
    /// Every line seen, parsed (all databases, all clients).
    pub all: Vec<Line>,
    /// The node (index of its watch, in primary order) of each connector connection, after a
    /// [`Observed::merge`]; empty on a single engine.
    pub node_of: BTreeMap<String, usize>,
}

impl Observed {
    /// What several nodes' watches saw, as one: commands and script calls of every node, every
    /// line in engine time order. A client's address is unique per destination, not across
    /// nodes: the kernel may give a connection to one node the local port of a live connection
    /// to another. Such connections' commands are kept under their one address, node after
    /// node, never one node's overwriting the other's (which once hid every script of G2's
    /// workload on a cluster: "MONITOR saw no script").
    pub fn merge(parts: Vec<Observed>) -> Observed {
        let mut out = Observed::default();
        for (node, p) in parts.into_iter().enumerate() {
            out.node_of
                .extend(p.commands.keys().map(|addr| (addr.clone(), node)));
            for (addr, cmds) in p.commands {
                out.commands.entry(addr).or_default().extend(cmds);
            }
            out.scripts.extend(p.scripts);
            out.unparsed.extend(p.unparsed);
            out.stray_lua += p.stray_lua;
            out.all.extend(p.all);
        }
        out.all.sort_by_key(|l| l.at_us);
        out
    }

    /// Client addresses of the connector, in address order.
    pub fn clients(&self) -> Vec<&str> {
        self.commands.keys().map(String::as_str).collect()
    }

    /// Every plain command of every connector connection, with its client.
    pub fn every_command(&self) -> impl Iterator<Item = (&str, &Vec<String>)> {
        self.commands
            .iter()
            .flat_map(|(c, cmds)| cmds.iter().map(move |a| (c.as_str(), a)))
    }
}

/// Attributes raw `MONITOR` lines to the connector: connections of database `db` other than the
/// `harness` addresses, and `lua` lines of `db` to the latest script call of such a connection.
pub fn attribute(lines: &[String], db: u32, harness: &BTreeSet<String>) -> Observed {
    let mut obs = Observed::default();
    for raw in lines {
        match parse_line(raw) {
            Some(l) => obs.all.push(l),
            None => obs.unparsed.push(raw.clone()),
        }
    }
    let connector: BTreeSet<String> = obs
        .all
        .iter()
        .filter(|l| l.db == db && !l.is_lua() && !harness.contains(&l.addr))
        .map(|l| l.addr.clone())
        .collect();
    let mut current: Option<ScriptCall> = None;
    let mut scripts = Vec::new();
    for l in &obs.all {
        if l.is_lua() {
            if l.db != db {
                continue;
            }
            match current.as_mut() {
                Some(call) => call.inner.push(l.args.clone()),
                None => obs.stray_lua += 1,
            }
            continue;
        }
        if l.db == db {
            // Any other command of this database ends the running script call.
            if let Some(done) = current.take() {
                scripts.push(done);
            }
        }
        if !connector.contains(&l.addr) {
            continue;
        }
        obs.commands
            .entry(l.addr.clone())
            .or_default()
            .push(l.args.clone());
        let cmd = l.cmd();
        if (cmd == "EVALSHA" || cmd == "EVAL") && l.db == db {
            let n: usize = l.args.get(2).and_then(|n| n.parse().ok()).unwrap_or(0);
            let body = l.args.get(1).cloned().unwrap_or_default();
            let keys: Vec<String> = l.args.iter().skip(3).take(n).cloned().collect();
            let argv: Vec<String> = l.args.iter().skip(3 + n).cloned().collect();
            current = Some(ScriptCall {
                client: l.addr.clone(),
                sha: if cmd == "EVAL" {
                    sha1_hex(body.as_bytes())
                } else {
                    body.to_ascii_lowercase()
                },
                eval: cmd == "EVAL",
                keys,
                argv,
                inner: Vec::new(),
            });
        }
    }
    if let Some(done) = current.take() {
        scripts.push(done);
    }
    obs.scripts = scripts;
    obs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_script_lines() {
        let lines: Vec<String> = [
            r#"1.0 [0 10.0.0.1:1] "HELLO" "3""#,
            r#"1.0 [901 10.0.0.1:1] "SELECT" "901""#,
            r#"1.0 [901 10.0.0.9:9] "FLUSHDB""#,
            r#"1.1 [901 10.0.0.1:1] "EVALSHA" "ABC" "1" "emq:{q}:pending" "emq:{q}:job:""#,
            r#"1.2 [901 lua] "ZPOPMIN" "emq:{q}:pending""#,
            r#"1.3 [901 lua] "TIME""#,
            r#"1.4 [902 lua] "INCR" "x""#,
            r#"1.5 [901 10.0.0.1:1] "ZCARD" "emq:{q}:pending""#,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let harness = BTreeSet::from(["10.0.0.9:9".to_string()]);
        let o = attribute(&lines, 901, &harness);
        assert_eq!(o.clients(), ["10.0.0.1:1"]);
        assert_eq!(o.commands["10.0.0.1:1"].len(), 4);
        assert_eq!(o.scripts.len(), 1);
        let s = &o.scripts[0];
        assert_eq!(s.sha, "abc");
        assert_eq!(s.keys, ["emq:{q}:pending"]);
        assert_eq!(s.argv, ["emq:{q}:job:"]);
        assert_eq!(s.inner.len(), 2);
        assert_eq!(o.stray_lua, 0);
    }

    #[test]
    fn one_address_on_two_nodes_keeps_both_nodes_commands() {
        let on = |lines: &[&str]| {
            let lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            attribute(&lines, 0, &BTreeSet::new())
        };
        let a = on(&[r#"1.0 [0 127.0.0.1:40000] "EVALSHA" "abc" "1" "emq:{q}:pending""#]);
        let b = on(&[r#"1.1 [0 127.0.0.1:40000] "HGETALL" "emq:fence""#]);
        let o = Observed::merge(vec![a, b]);
        assert_eq!(
            o.commands["127.0.0.1:40000"]
                .iter()
                .map(|c| c[0].as_str())
                .collect::<Vec<_>>(),
            ["EVALSHA", "HGETALL"]
        );
        assert_eq!(o.every_command().count(), 2);
    }
}
