//! Does every new connection read the fence first (R3.1)? Pure: judged on attributed `MONITOR`
//! lines. A client library that reconnects by itself (redis-py's pool after "Connection has
//! data", redis-rb's `ensure_connected`, node-redis's reconnect loop) opens a connection on the
//! next verb and sends its `EVALSHA` at once; these functions find such connections.
//!
//! The harness marks what it is doing in the same `MONITOR` stream with keyless `ECHO`s from its
//! own connection: [`CALL_MARK`] before each connector call, so a connection is named with the
//! verb that opened it.

use std::collections::BTreeMap;

use crate::observe::attribute::Observed;
use crate::observe::line::{Line, is_script_cmd, keys_of, names_emq_key, stable};
use crate::protocol::bundle::Bundle;
use crate::protocol::grammar::FENCE_KEY;

/// `ECHO "emq-call <n> <cmd>"`: the harness is about to send call `n`, a `<cmd>`.
pub const CALL_MARK: &str = "emq-call ";

/// `ECHO "emq-kill <round> <node> <addr>…"`: the harness is about to kill the connector's
/// connections on the node at that index (of the watches, in primary order), in its kill round
/// `round`; the addresses are the connections the kill found there, which opened before it and
/// replace nothing it kills. The kill follows the mark at once.
pub const KILL_MARK: &str = "emq-kill ";

/// `ECHO "emq-kept <round> <node> <addr>"`: a connector connection on that node that round
/// `round`'s kills left alive (it opened between their listing and the kills).
pub const KEPT_MARK: &str = "emq-kept ";

/// The kill mark of `round` on `node`, naming the connections the kill found there.
pub fn kill_mark(round: usize, node: usize, addrs: &[&str]) -> String {
    format!("{KILL_MARK}{round} {node} {}", addrs.join(" "))
        .trim_end()
        .to_string()
}

/// The mark of a connection on `node` that `round`'s kills left alive.
pub fn kept_mark(round: usize, node: usize, addr: &str) -> String {
    format!("{KEPT_MARK}{round} {node} {addr}")
}

/// A connection that sent a script (or touched an EchoMQ key) before reading the fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfenced {
    /// The connection's address (`127.0.0.1:51234`).
    pub client: String,
    /// The harness's call under way when it first appeared (`claim (call 17 of the crash phase,
    /// connects included)`).
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

/// A command in a few words: `HGETALL emq:fence`, `EVALSHA <sha>`, `SCRIPT LOAD`; a SHA named
/// by `bundle`'s scripts (`EVALSHA 267a20df… (promote)`).
pub fn describe(args: &[String], bundle: &Bundle) -> String {
    match keys_of(args).and_then(|k| k.first().map(|k| stable(k))) {
        Some(k) if !is_script_cmd(args) => format!("{} {k}", args[0].to_uppercase()),
        _ => match args[0].to_ascii_uppercase().as_str() {
            "EVALSHA" => format!(
                "EVALSHA {}",
                bundle.sha_label(args.get(1).map_or("", |s| s.as_str()))
            ),
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

/// The call a mark names, for evidence: `claim (call 17 of the crash phase, connects included)`.
/// The number alone left an author guessing what it counted: it counts every request the
/// crash phase sent, each `connect` after a kill included.
fn during(mark: Option<&str>) -> String {
    match mark.and_then(|m| m.split_once(' ')) {
        Some((n, cmd)) => format!("{cmd} (call {n} of the crash phase, connects included)"),
        None => "the set-up before the first call".into(),
    }
}

/// The first EchoMQ commands of `client` (its plain commands in order), described.
fn first_emq(obs: &Observed, client: &str, bundle: &Bundle) -> Vec<String> {
    obs.commands
        .get(client)
        .map(|cmds| {
            cmds.iter()
                .filter(|a| is_emq(a))
                .take(3)
                .map(|a| describe(a, bundle))
                .collect()
        })
        .unwrap_or_default()
}

/// True for an EchoMQ command that may come before the fence read on a new connection: a read
/// of a read verb (`browse`'s `ZRANGE` and `HGET`/`HMGET`, `pending_size`'s `ZCARD`), which
/// runs no script (R3.5 permits it: P3.1).
pub fn is_read_verb(args: &[String]) -> bool {
    crate::protocol::commands::keys_allowed(&args[0]) == crate::protocol::commands::Keys::Any
        && !is_fence_read(args)
}

/// On a single engine: every connector connection that sent a script, or wrote an EchoMQ key,
/// before it read the fence. Every connection counts, since a session is one connection (R5.7)
/// and each new one is a connect (R3.1); the reads of a read verb may come first (R3.5, P3.1).
/// Returns the offenders and how many connections did EchoMQ work; `bundle` names their scripts.
pub fn unfenced_connections(obs: &Observed, bundle: &Bundle) -> (Vec<Unfenced>, usize) {
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
        if !cmds.iter().any(|a| is_emq(a)) {
            continue;
        }
        working += 1;
        // The first EchoMQ command that is not a read verb's: a fence read, or a breach.
        let first = cmds.iter().find(|a| is_emq(a) && !is_read_verb(a));
        if first.is_some_and(|a| !is_fence_read(a)) {
            bad.push(Unfenced {
                client: client.clone(),
                during: during(opened.get(client.as_str()).copied().flatten()),
                first: first_emq(obs, client, bundle),
            });
        }
    }
    (bad, working)
}

/// On a cluster: every connection the connector opened on a node after the harness killed its
/// connections there (a replacement, R3.5, R8.9) whose first script came before any fence read
/// made since the kill (a read before it is no breach: SPEC R8.9 speaks of scripts). A first
/// connection to a node nothing was killed on is not judged: it needs no fence read (R8.1), and a
/// session's node connections open lazily. Returns the offenders and how many connections were
/// opened on a node after a kill there; `bundle` names their scripts.
///
/// A connection's first line is not when it opened: one whose fence read went over another
/// connection shows first with its script, maybe just after a mark. So the connections a kill
/// found (named in its mark) and those it left alive (its `kept` marks, which follow the kills)
/// are not judged against that kill, and a script seen before a `kept` mark is forgiven when the
/// mark comes. Neither holds where an older kill on the node still waits for a fence read: a
/// connection opened since may replace what that one killed, so it is judged.
pub fn unfenced_replacements(obs: &Observed, bundle: &Bundle) -> (Vec<Unfenced>, usize) {
    let mut current: Option<&str> = None;
    // Each node with a kill since the last fence read, with the round of the oldest such kill;
    // the replacements opened since, with the call under way when each appeared.
    let mut killed: BTreeMap<usize, usize> = BTreeMap::new();
    let mut killed_ever = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut suspects: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    // Each offender with the oldest kill its node waited on when its script came.
    let (mut bad, mut judged): (Vec<(Option<usize>, Unfenced)>, usize) = (Vec::new(), 0);
    for l in &obs.all {
        if let Some(m) = mark(l, CALL_MARK) {
            current = Some(m);
            continue;
        }
        if let Some((round, node, addrs)) = mark(l, KEPT_MARK).and_then(parse_round_mark) {
            // Left alive by `round`'s kills: no replacement of them, nor of any kill before
            // that a fence read has since answered.
            if no_older_kill(&killed, node, round) {
                for addr in addrs {
                    seen.insert(addr);
                    suspects.remove(addr);
                    bad.retain(|(oldest, u)| !(u.client == addr && *oldest == Some(round)));
                }
            }
            continue;
        }
        if let Some((round, node, addrs)) = mark(l, KILL_MARK).and_then(parse_round_mark) {
            // Found by the kill, so opened before it; unless an older kill still waits.
            if no_older_kill(&killed, node, round) {
                seen.extend(addrs);
            }
            killed.entry(node).or_insert(round);
            killed_ever.insert(node);
            continue;
        }
        let addr = l.addr.as_str();
        if !obs.commands.contains_key(addr) {
            continue;
        }
        let node = obs.node_of.get(addr);
        if seen.insert(addr) {
            judged += usize::from(node.is_some_and(|n| killed_ever.contains(n)));
            if node.is_some_and(|n| killed.contains_key(n)) {
                suspects.insert(addr, current);
            }
        }
        if is_fence_read(&l.args) {
            killed.clear();
            suspects.clear();
        } else if is_script_cmd(&l.args)
            && let Some(opened) = suspects.remove(addr)
        {
            let u = Unfenced {
                client: addr.to_string(),
                during: during(opened),
                first: first_emq(obs, addr, bundle),
            };
            bad.push((node.and_then(|n| killed.get(n).copied()), u));
        }
    }
    (bad.into_iter().map(|(_, u)| u).collect(), judged)
}

/// True when no kill on `node` older than `round` still waits for a fence read (`killed`: each
/// node's oldest such kill): only then is a connection `round` found or left alive no
/// replacement.
fn no_older_kill(killed: &BTreeMap<usize, usize>, node: usize, round: usize) -> bool {
    killed.get(&node).is_none_or(|&k| k == round)
}

/// A kill or `kept` mark's words after its prefix: `<round> <node> <addr>…`.
fn parse_round_mark(rest: &str) -> Option<(usize, usize, Vec<&str>)> {
    let mut words = rest.split_whitespace();
    let round = words.next()?.parse().ok()?;
    let node = words.next()?.parse().ok()?;
    Some((round, node, words.collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::attribute::attribute;

    fn bundle() -> Bundle {
        Bundle::load_default().unwrap()
    }

    #[test]
    fn a_command_is_described_with_the_script_its_bundle_names() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let claim = crate::protocol::bundle::FROZEN_CLAIM_SHA1;
        let b = bundle();
        assert_eq!(
            describe(&args(&["evalsha", claim, "0"]), &b),
            "EVALSHA 2319de1e… (claim)"
        );
        assert_eq!(
            describe(&args(&["HGETALL", "emq:fence"]), &b),
            "HGETALL emq:fence"
        );
        assert_eq!(describe(&args(&["SCRIPT", "LOAD", "x"]), &b), "SCRIPT LOAD");
    }

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
        let (bad, working) = unfenced_connections(&obs, &bundle());
        assert_eq!(working, 2);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].client, "127.0.0.1:3");
        assert_eq!(
            bad[0].during,
            "claim (call 2 of the crash phase, connects included)"
        );
        assert_eq!(bad[0].first, ["EVALSHA abc (not a bundle script)"]);
        assert!(
            bad[0]
                .to_string()
                .contains("opened during claim (call 2 of the crash phase, connects included)")
        );
    }

    #[test]
    fn a_read_verb_may_come_before_the_fence_read_and_a_script_may_not() {
        // The Ruby connector's replacement connection: ZCARD (pending_size), then the fence read,
        // then its first script: compliant (R3.5 lets a read verb come first).
        let obs = monitor(&[
            r#"[5 127.0.0.1:1] "ECHO" "emq-call 1 pending_size""#,
            r#"[5 127.0.0.1:2] "ZCARD" "emq:{g8c}:pending""#,
            r#"[5 127.0.0.1:2] "ZRANGE" "emq:{g8c}:pending" "0" "9""#,
            r#"[5 127.0.0.1:2] "HMGET" "emq:{g8c}:job:j0000000000000001" "payload""#,
            r#"[5 127.0.0.1:2] "HGETALL" "emq:fence""#,
            r#"[5 127.0.0.1:2] "EVALSHA" "abc" "2" "emq:{g8c}:pending" "emq:{g8c}:active""#,
            // Reads only, never a script: nothing to judge but the reads.
            r#"[5 127.0.0.1:3] "ZCARD" "emq:{g8c}:pending""#,
            // A read, then a script with no fence read: a breach.
            r#"[5 127.0.0.1:4] "ZCARD" "emq:{g8c}:pending""#,
            r#"[5 127.0.0.1:4] "EVALSHA" "abc" "2" "emq:{g8c}:pending" "emq:{g8c}:active""#,
            // A write of an EchoMQ key before the fence read: a breach.
            r#"[5 127.0.0.1:5] "HSETNX" "emq:fence" "protocol" "1""#,
        ]);
        let (bad, working) = unfenced_connections(&obs, &bundle());
        assert_eq!(working, 4);
        let clients: Vec<&str> = bad.iter().map(|b| b.client.as_str()).collect();
        assert_eq!(clients, ["127.0.0.1:4", "127.0.0.1:5"]);
        assert_eq!(
            bad[0].first,
            [
                "ZCARD emq:{g8c}:pending",
                "EVALSHA abc (not a bundle script)"
            ]
        );
    }

    fn cluster(nodes: &[&[&str]]) -> Observed {
        let harness: std::collections::BTreeSet<String> =
            ["127.0.0.1:1".to_string()].into_iter().collect();
        let parts = nodes
            .iter()
            .map(|lines| {
                let raw: Vec<String> = lines
                    .iter()
                    .map(|l| {
                        let (at, rest) = l.split_once(' ').unwrap();
                        format!("1700000000.{at:0>6} {rest}")
                    })
                    .collect();
                attribute(&raw, 0, &harness)
            })
            .collect();
        Observed::merge(parts)
    }

    #[test]
    fn on_a_cluster_a_replacement_needs_a_fence_read_after_the_kill_and_a_first_connection_does_not()
     {
        // Node 0 holds the fence; node 1 a queue. The session's connection to node 1 is killed.
        let fenced = cluster(&[
            &[
                r#"1 [0 127.0.0.1:10] "HGETALL" "emq:fence""#,
                r#"3 [0 127.0.0.1:1] "ECHO" "emq-kill 0 1 127.0.0.1:11""#,
                r#"4 [0 127.0.0.1:1] "ECHO" "emq-call 2 claim""#,
                r#"5 [0 127.0.0.1:12] "HGETALL" "emq:fence""#,
            ],
            &[
                r#"2 [0 127.0.0.1:11] "EVALSHA" "abc" "2""#,
                r#"3 [0 127.0.0.1:1] "ECHO" "emq-kill 0 1 127.0.0.1:11""#,
                r#"6 [0 127.0.0.1:13] "EVALSHA" "abc" "2""#,
            ],
        ]);
        let (bad, judged) = unfenced_replacements(&fenced, &bundle());
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(judged, 1);

        let silent = cluster(&[
            &[
                r#"1 [0 127.0.0.1:10] "HGETALL" "emq:fence""#,
                r#"3 [0 127.0.0.1:1] "ECHO" "emq-kill 0 1 127.0.0.1:11""#,
                r#"4 [0 127.0.0.1:1] "ECHO" "emq-call 2 claim""#,
            ],
            &[
                r#"2 [0 127.0.0.1:11] "EVALSHA" "abc" "2""#,
                r#"3 [0 127.0.0.1:1] "ECHO" "emq-kill 0 1 127.0.0.1:11""#,
                r#"5 [0 127.0.0.1:13] "CLIENT" "SETINFO" "LIB-NAME" "x""#,
                r#"6 [0 127.0.0.1:13] "EVALSHA" "abc" "2""#,
            ],
        ]);
        let (bad, judged) = unfenced_replacements(&silent, &bundle());
        assert_eq!(judged, 1);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].client, "127.0.0.1:13");
        assert_eq!(
            bad[0].during,
            "claim (call 2 of the crash phase, connects included)"
        );

        // A first connection to a node nothing was killed on needs no fence read (R8.1).
        let lazy = cluster(&[
            &[
                r#"1 [0 127.0.0.1:10] "HGETALL" "emq:fence""#,
                r#"3 [0 127.0.0.1:1] "ECHO" "emq-kill 0 0 127.0.0.1:10""#,
            ],
            &[r#"6 [0 127.0.0.1:13] "EVALSHA" "abc" "2""#],
        ]);
        assert_eq!(unfenced_replacements(&lazy, &bundle()), (Vec::new(), 0));
    }

    /// Node 0 holds the fence (read over connection 10), node 1 a queue; each line is
    /// `(time, connection or None for the harness's mark, what)`.
    fn judged(lines: &[(u32, Option<u32>, String)]) -> (Vec<String>, usize) {
        let text = |(at, who, what): &(u32, Option<u32>, String)| match who {
            None => format!(r#"{at} [0 127.0.0.1:1] "ECHO" "{what}""#),
            Some(c) => format!(r#"{at} [0 127.0.0.1:{c}] {what}"#),
        };
        let on = |node: u32| -> Vec<String> {
            lines
                .iter()
                .filter(|(_, who, _)| who.is_none_or(|c| (c == 10) == (node == 0)))
                .map(text)
                .collect()
        };
        let (n0, n1) = (on(0), on(1));
        let (s0, s1): (Vec<&str>, Vec<&str>) = (
            n0.iter().map(String::as_str).collect(),
            n1.iter().map(String::as_str).collect(),
        );
        let obs = cluster(&[&s0, &s1]);
        let (bad, judged) = unfenced_replacements(&obs, &bundle());
        (bad.into_iter().map(|b| b.client).collect(), judged)
    }

    #[test]
    fn a_connection_the_kill_found_or_left_alive_replaces_nothing() {
        let fence = || r#""HGETALL" "emq:fence""#.to_string();
        let script = || r#""EVALSHA" "abc" "2""#.to_string();
        let kill = |r, addrs: &[&str]| kill_mark(r, 1, addrs);
        let kept = |r, addr| kept_mark(r, 1, addr);
        // 11 read the fence (over 10) before the mark and sends its script just after it, just
        // before it is killed: it opened before the kill.
        let found = [
            (1, Some(10), fence()),
            (3, None, kill(4, &["127.0.0.1:11"])),
            (5, Some(11), script()),
        ];
        assert_eq!(judged(&found), (vec![], 0));
        // 12 opened between the kill's listing and its kills: its script before the `kept` mark
        // that names it is forgiven, and one after it is not judged; 13, unnamed, is judged.
        let kept_alive = [
            (1, Some(10), fence()),
            (3, None, kill(4, &["127.0.0.1:11"])),
            (5, Some(12), script()),
            (6, Some(13), script()),
            (7, None, kept(4, "127.0.0.1:12")),
            (8, Some(12), script()),
        ];
        assert_eq!(judged(&kept_alive), (vec!["127.0.0.1:13".to_string()], 2));
        let named_first = [
            (1, Some(10), fence()),
            (3, None, kill(4, &[])),
            (4, None, kept(4, "127.0.0.1:12")),
            (6, Some(12), script()),
        ];
        assert_eq!(judged(&named_first), (vec![], 0));
    }

    #[test]
    fn an_older_kill_that_waits_for_a_fence_read_judges_what_a_later_one_found_or_left() {
        let script = || r#""EVALSHA" "abc" "2""#.to_string();
        // Round 4 killed on node 1 and no fence read followed. 12, a replacement of it, is found
        // by round 5's kill, or left alive by it: its script is judged either way.
        let found_later = [
            (1, Some(10), r#""HGETALL" "emq:fence""#.to_string()),
            (3, None, kill_mark(4, 1, &["127.0.0.1:11"])),
            (5, None, kill_mark(5, 1, &["127.0.0.1:12"])),
            (6, Some(12), script()),
        ];
        assert_eq!(judged(&found_later), (vec!["127.0.0.1:12".to_string()], 1));
        let kept_later = [
            (1, Some(10), r#""HGETALL" "emq:fence""#.to_string()),
            (3, None, kill_mark(4, 1, &["127.0.0.1:11"])),
            (5, None, kill_mark(5, 1, &[])),
            (6, Some(12), script()),
            (7, None, kept_mark(5, 1, "127.0.0.1:12")),
        ];
        assert_eq!(judged(&kept_later), (vec!["127.0.0.1:12".to_string()], 1));
        // A mark without an address names the node alone.
        assert_eq!(kill_mark(5, 1, &[]), "emq-kill 5 1");
    }
}
