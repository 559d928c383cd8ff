//! Does every new connection read the fence first (R3.1)? Pure: judged on attributed `MONITOR`
//! lines. A client library that reconnects by itself (redis-py's pool after "Connection has
//! data", redis-rb's `ensure_connected`, node-redis's reconnect loop) opens a connection on the
//! next verb and sends its `EVALSHA` at once; these functions find such connections.
//!
//! The harness marks what it is doing in the same `MONITOR` stream with keyless `ECHO`s from its
//! own connection: [`CALL_MARK`] before each connector call, so a connection is named with the
//! verb that opened it.

use crate::observe::attribute::Observed;
use crate::observe::line::{Line, is_script_cmd, keys_of, names_emq_key, stable};
use crate::protocol::grammar::FENCE_KEY;

/// `ECHO "emq-call <n> <cmd>"`: the harness is about to send call `n`, a `<cmd>`.
pub const CALL_MARK: &str = "emq-call ";

/// A connection that sent a script (or touched an EchoMQ key) before reading the fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfenced {
    /// The connection's address (`127.0.0.1:51234`).
    pub client: String,
    /// The harness's call under way when it first appeared (`claim (call 17)`).
    pub during: String,
    /// Its first EchoMQ commands, described (at most three).
    pub first: Vec<String>,
}

impl std::fmt::Display for Unfenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "client {} opened during {} began with {}",
            self.client,
            self.during,
            self.first.join(", ")
        )
    }
}

/// A fence read: `HGETALL`/`HMGET` of `emq:fence`.
pub fn is_fence_read(args: &[String]) -> bool {
    let cmd = args[0].to_ascii_uppercase();
    (cmd == "HGETALL" || cmd == "HMGET") && args.get(1).map(String::as_str) == Some(FENCE_KEY)
}

/// True for a command that counts as EchoMQ work: a script call or a command on an `emq:` key.
pub fn is_emq(args: &[String]) -> bool {
    is_script_cmd(args) || names_emq_key(args)
}

/// A command in a few words: `HGETALL emq:fence`, `EVALSHA <sha>`, `SCRIPT LOAD`.
pub fn describe(args: &[String]) -> String {
    match keys_of(args).and_then(|k| k.first().map(|k| stable(k))) {
        Some(k) if !is_script_cmd(args) => format!("{} {k}", args[0].to_uppercase()),
        _ => match args[0].to_ascii_uppercase().as_str() {
            "EVALSHA" => format!("EVALSHA {}", args.get(1).map_or("", |s| s.as_str())),
            "SCRIPT" => "SCRIPT LOAD".to_string(),
            other => other.to_string(),
        },
    }
}

fn mark<'l>(l: &'l Line, prefix: &str) -> Option<&'l str> {
    if !l.args[0].eq_ignore_ascii_case("ECHO") {
        return None;
    }
    l.args.get(1)?.strip_prefix(prefix)
}

/// The call a mark names, for evidence: `claim (call 17)`.
fn during(mark: Option<&str>) -> String {
    match mark.and_then(|m| m.split_once(' ')) {
        Some((n, cmd)) => format!("{cmd} (call {n})"),
        None => "the set-up before the first call".into(),
    }
}

/// The first EchoMQ commands of `client` (its plain commands in order), described.
fn first_emq(obs: &Observed, client: &str) -> Vec<String> {
    obs.commands
        .get(client)
        .map(|cmds| {
            cmds.iter()
                .filter(|a| is_emq(a))
                .take(3)
                .map(|a| describe(a))
                .collect()
        })
        .unwrap_or_default()
}

/// On a single engine: every connector connection whose first EchoMQ command is not a fence
/// read. Every connection counts, since a session is one connection (R5.7) and each new one is
/// a connect (R3.1). Returns the offenders and how many connections did EchoMQ work.
pub fn unfenced_connections(obs: &Observed) -> (Vec<Unfenced>, usize) {
    let mut current: Option<&str> = None;
    let mut opened: std::collections::BTreeMap<&str, Option<&str>> = Default::default();
    for l in &obs.all {
        if let Some(m) = mark(l, CALL_MARK) {
            current = Some(m);
        } else if obs.commands.contains_key(&l.addr) {
            opened.entry(l.addr.as_str()).or_insert(current);
        }
    }
    let mut bad = Vec::new();
    let mut working = 0;
    for (client, cmds) in &obs.commands {
        let Some(first) = cmds.iter().find(|a| is_emq(a)) else {
            continue;
        };
        working += 1;
        if !is_fence_read(first) {
            bad.push(Unfenced {
                client: client.clone(),
                during: during(opened.get(client.as_str()).copied().flatten()),
                first: first_emq(obs, client),
            });
        }
    }
    (bad, working)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::attribute::attribute;

    fn monitor(lines: &[&str]) -> Observed {
        let raw: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("1700000000.{:06} {l}", i + 1))
            .collect();
        let harness = ["127.0.0.1:1".to_string()].into_iter().collect();
        attribute(&raw, 5, &harness)
    }

    #[test]
    fn a_connection_that_scripts_before_the_fence_is_named_with_its_call() {
        let obs = monitor(&[
            r#"[5 127.0.0.1:1] "ECHO" "emq-call 1 connect""#,
            r#"[5 127.0.0.1:2] "SELECT" "5""#,
            r#"[5 127.0.0.1:2] "HGETALL" "emq:fence""#,
            r#"[5 127.0.0.1:2] "EVALSHA" "abc" "0""#,
            r#"[5 127.0.0.1:1] "ECHO" "emq-call 2 claim""#,
            r#"[5 127.0.0.1:3] "AUTH" "pw""#,
            r#"[5 127.0.0.1:3] "EVALSHA" "abc" "0""#,
            r#"[5 127.0.0.1:4] "PING""#,
        ]);
        let (bad, working) = unfenced_connections(&obs);
        assert_eq!(working, 2);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].client, "127.0.0.1:3");
        assert_eq!(bad[0].during, "claim (call 2)");
        assert_eq!(bad[0].first, ["EVALSHA abc"]);
        assert!(bad[0].to_string().contains("opened during claim (call 2)"));
    }
}
