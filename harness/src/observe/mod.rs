//! What a connector really sent, seen on the engine: `MONITOR` lines parsed and attributed.
//!
//! A `MONITOR` line is `1700000000.123456 [<db> <addr>] "CMD" "arg" ...`; commands run inside a
//! script appear as `[<db> lua] "CMD" ...` (Valkey 9 prints the database number there) right after
//! the `EVALSHA`/`EVAL` that ran them: scripts are atomic, so nothing interleaves.
//!
//! Attribution: a [`Watch`] knows the harness's own connections (the admin's and the monitor's) and
//! the gate's database. Every other client address with a line tagged with that database is a
//! connector connection; all its lines (also those before its `SELECT`) are the connector's, and
//! each `lua` line of that database belongs to the latest script call from a connector connection.
//! Attribution by exclusion (rather than by a `CLIENT LIST` taken at one moment) also catches
//! connections that closed before anyone could list them: a refused connect, a killed session.

use std::collections::{BTreeMap, BTreeSet};

use crate::connector::{Connector, Verbs};
use crate::engine::Admin;
use crate::engine::admin::Monitor;
use crate::error::{ConnectorError, HarnessError};
use crate::protocol::bundle::sha1_hex;

/// One parsed `MONITOR` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub db: u32,
    /// `ip:port`, `unix:...`, or `lua` for a command run by a script.
    pub addr: String,
    /// The command name (as sent) and its arguments, unescaped.
    pub args: Vec<String>,
}

impl Line {
    /// True for a command run inside a script.
    pub fn is_lua(&self) -> bool {
        self.addr == "lua"
    }

    /// The command name, upper-cased.
    pub fn cmd(&self) -> String {
        self.args
            .first()
            .map(|c| c.to_ascii_uppercase())
            .unwrap_or_default()
    }
}

/// Parses one `MONITOR` line; `None` when it is not one.
pub fn parse_line(line: &str) -> Option<Line> {
    let line = line.trim_end_matches(['\r', '\n']);
    let open = line.find(" [")?;
    let rest = &line[open + 2..];
    let quote = rest.find('"').unwrap_or(rest.len());
    let head = rest[..quote].trim_end();
    let head = head.strip_suffix(']')?;
    let (db, addr) = head.split_once(' ')?;
    let db = db.parse().ok()?;
    let args = parse_args(&rest[quote..])?;
    Some(Line {
        db,
        addr: addr.to_string(),
        args,
    })
}

/// Unquotes `"a" "b\"c" "\x01"`: the escapes of `sdscatrepr`.
fn parse_args(s: &str) -> Option<Vec<String>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => i += 1,
            b'"' => {
                i += 1;
                let mut cur = Vec::new();
                loop {
                    let c = *b.get(i)?;
                    i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let e = *b.get(i)?;
                            i += 1;
                            match e {
                                b'n' => cur.push(b'\n'),
                                b'r' => cur.push(b'\r'),
                                b't' => cur.push(b'\t'),
                                b'a' => cur.push(7),
                                b'b' => cur.push(8),
                                b'x' => {
                                    let hex = std::str::from_utf8(b.get(i..i + 2)?).ok()?;
                                    cur.push(u8::from_str_radix(hex, 16).ok()?);
                                    i += 2;
                                }
                                other => cur.push(other),
                            }
                        }
                        other => cur.push(other),
                    }
                }
                out.push(
                    String::from_utf8(cur)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
                );
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Commands that name no key (free for a connector to send, SPEC §4).
const KEYLESS: &[&str] = &[
    "HELLO",
    "AUTH",
    "SELECT",
    "CLIENT",
    "PING",
    "ECHO",
    "SCRIPT",
    "MULTI",
    "EXEC",
    "DISCARD",
    "QUIT",
    "RESET",
    "READONLY",
    "READWRITE",
    "TIME",
    "INFO",
    "COMMAND",
    "CONFIG",
    "DBSIZE",
    "WAIT",
    "FUNCTION",
    "LASTSAVE",
    "ROLE",
    "MEMORY",
];

/// Commands whose every argument is a key.
const ALL_KEYS: &[&str] = &["DEL", "UNLINK", "EXISTS", "MGET", "TOUCH", "WATCH"];

/// The keys a command names (by the command tables of Valkey, for the commands connectors and
/// scripts use). `None` for a command this table does not know: the caller must judge it
/// conservatively.
pub fn keys_of(args: &[String]) -> Option<Vec<&str>> {
    let cmd = args.first()?.to_ascii_uppercase();
    let rest = &args[1..];
    if KEYLESS.contains(&cmd.as_str()) {
        return Some(Vec::new());
    }
    if ALL_KEYS.contains(&cmd.as_str()) {
        return Some(rest.iter().map(String::as_str).collect());
    }
    match cmd.as_str() {
        "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "FCALL" | "FCALL_RO" => {
            let n: usize = rest.get(1)?.parse().ok()?;
            Some(rest.get(2..2 + n)?.iter().map(String::as_str).collect())
        }
        "MSET" | "MSETNX" => Some(rest.iter().step_by(2).map(String::as_str).collect()),
        "RENAME" | "RENAMENX" | "SMOVE" | "LMOVE" | "RPOPLPUSH" | "COPY" | "ZRANGESTORE" => {
            Some(rest.iter().take(2).map(String::as_str).collect())
        }
        "ZPOPMIN" | "ZPOPMAX" | "ZADD" | "ZREM" | "ZSCORE" | "ZMSCORE" | "ZRANGE"
        | "ZRANGEBYSCORE" | "ZREVRANGE" | "ZREVRANGEBYSCORE" | "ZRANGEBYLEX" | "ZCARD"
        | "ZCOUNT" | "ZINCRBY" | "ZRANK" | "ZREVRANK" | "ZREMRANGEBYSCORE" | "ZREMRANGEBYRANK"
        | "ZSCAN" | "HGET" | "HSET" | "HSETNX" | "HMSET" | "HMGET" | "HGETALL" | "HDEL"
        | "HINCRBY" | "HINCRBYFLOAT" | "HEXISTS" | "HKEYS" | "HVALS" | "HLEN" | "HSCAN"
        | "HSTRLEN" | "HRANDFIELD" | "GET" | "SET" | "SETNX" | "SETEX" | "PSETEX" | "GETSET"
        | "GETDEL" | "GETEX" | "APPEND" | "STRLEN" | "INCR" | "INCRBY" | "INCRBYFLOAT" | "DECR"
        | "DECRBY" | "TYPE" | "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" | "PERSIST"
        | "TTL" | "PTTL" | "DUMP" | "RESTORE" | "LPUSH" | "RPUSH" | "LPOP" | "RPOP" | "LRANGE"
        | "LLEN" | "LREM" | "LINDEX" | "LSET" | "LTRIM" | "SADD" | "SREM" | "SMEMBERS"
        | "SISMEMBER" | "SCARD" | "SPOP" | "XADD" | "XRANGE" | "XLEN" | "XDEL" | "XTRIM"
        | "GETRANGE" | "SETRANGE" | "OBJECT" => {
            Some(rest.iter().take(1).map(String::as_str).collect())
        }
        _ => None,
    }
}

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
}

impl Observed {
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

/// A `MONITOR` on one gate database, knowing the harness's own connections.
///
/// [`Monitor::stop`] ends on a marker it sends itself, so a watch either sees every line sent
/// before `stop` or errors: a gate must not judge a partial view.
pub struct Watch {
    monitor: Monitor,
    db: u32,
    harness: BTreeSet<String>,
}

impl Watch {
    /// Starts monitoring database `db` of `engine`; `admin` is the gate's admin connection
    /// (excluded from attribution), `extra` any further harness client ids.
    pub fn start(admin: &mut Admin, db: u32, extra: &[u64]) -> Result<Self, HarnessError> {
        let monitor = admin.monitor()?;
        let mut ids = vec![admin.client_id()?, monitor.client_id];
        ids.extend_from_slice(extra);
        let harness = admin
            .client_list()?
            .into_iter()
            .filter(|c| ids.contains(&c.id))
            .map(|c| c.addr)
            .collect::<BTreeSet<_>>();
        if harness.len() < 2 {
            return Err(HarnessError::Engine(
                "CLIENT LIST does not show the harness's own connections".into(),
            ));
        }
        Ok(Self {
            monitor,
            db,
            harness,
        })
    }

    /// Stops and attributes what was seen.
    pub fn stop(self) -> Result<Observed, HarnessError> {
        let lines = self.monitor.stop()?;
        Ok(attribute(&lines, self.db, &self.harness))
    }
}

/// Client ids of the connector on `db`: every client of that database but the `harness` ids.
pub fn connector_clients(
    admin: &mut Admin,
    db: u32,
    harness: &[u64],
) -> Result<Vec<u64>, HarnessError> {
    Ok(admin
        .client_list()?
        .into_iter()
        .filter(|c| c.db == db && !harness.contains(&c.id))
        .map(|c| c.id)
        .collect())
}

/// Replaces job ids (`j` + 16 digits) by `<id>`, so evidence naming keys stays stable.
pub fn stable(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'j' && b.len() >= i + 17 && b[i + 1..i + 17].iter().all(u8::is_ascii_digit) {
            out.push_str("<id>");
            i += 17;
        } else {
            let ch = s[i..].chars().next().unwrap_or('?');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// True for a command that runs or loads a script.
pub fn is_script_cmd(args: &[String]) -> bool {
    let cmd = args
        .first()
        .map(|c| c.to_ascii_uppercase())
        .unwrap_or_default();
    match cmd.as_str() {
        "EVALSHA" | "EVAL" | "EVALSHA_RO" | "EVAL_RO" | "FCALL" | "FCALL_RO" | "FUNCTION" => true,
        "SCRIPT" => args.get(1).is_some_and(|s| s.eq_ignore_ascii_case("LOAD")),
        _ => false,
    }
}

/// True when the command names an EchoMQ key (`emq:` prefix); an unknown command counts when any
/// argument looks like one (judged conservatively).
pub fn names_emq_key(args: &[String]) -> bool {
    match keys_of(args) {
        Some(keys) => keys.iter().any(|k| k.starts_with("emq:")),
        None => args.iter().skip(1).any(|a| a.starts_with("emq:")),
    }
}

/// A short workload through every transition on `queue`: both enqueue branches, claim, complete,
/// retry (to delayed), promote, reap, and the two reads.
pub fn every_transition(
    c: &mut (dyn Connector + Send),
    session: &str,
    queue: &str,
) -> Result<(), ConnectorError> {
    c.enqueue(session, queue, "alpha", 0)?;
    c.enqueue(session, queue, "beta \"quoted\"\n", 0)?;
    c.enqueue(session, queue, "gamma", 0)?;
    c.enqueue(session, queue, "later", 3_600_000)?;
    c.browse(session, queue, 0, 10)?;
    c.pending_size(session, queue)?;
    if let Some(j) = c.claim(session, queue, 60_000)? {
        c.complete(session, queue, &j.id, j.attempts)?;
    }
    if let Some(j) = c.claim(session, queue, 0)? {
        c.retry(session, queue, &j.id, j.attempts, 0, 5)?;
    }
    c.promote(session, queue, 10)?;
    if c.claim(session, queue, 0)?.is_some() {
        c.reap(session, queue, 5, 10)?;
    }
    if let Some(j) = c.claim(session, queue, 0)? {
        c.retry(session, queue, &j.id, j.attempts, 0, 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_with_escapes() {
        let l = parse_line(
            r#"1795975415.501006 [905 127.0.0.1:41898] "eval" "return 1" "1" "k\"ey" "a\\b\n\x01\xc3\xa9 \"q\"""#,
        )
        .unwrap();
        assert_eq!(l.db, 905);
        assert_eq!(l.addr, "127.0.0.1:41898");
        assert_eq!(l.cmd(), "EVAL");
        assert_eq!(l.args[3], "k\"ey");
        assert_eq!(l.args[4], "a\\b\n\u{1}é \"q\"");
        let lua = parse_line(r#"1795975415.501088 [905 lua] "TIME""#).unwrap();
        assert!(lua.is_lua());
        assert_eq!(lua.args, ["TIME"]);
        let v6 = parse_line(r#"1.2 [0 [::1]:5000] "PING""#).unwrap();
        assert_eq!(v6.addr, "[::1]:5000");
        assert!(parse_line("OK").is_none());
    }

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
    fn key_positions() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(keys_of(&a(&["HGET", "k", "f"])).unwrap(), ["k"]);
        assert_eq!(keys_of(&a(&["del", "a", "b"])).unwrap(), ["a", "b"]);
        assert_eq!(
            keys_of(&a(&["CLIENT", "SETINFO", "x", "y"])).unwrap(),
            Vec::<&str>::new()
        );
        assert_eq!(
            keys_of(&a(&["EVALSHA", "s", "2", "a", "b", "c"])).unwrap(),
            ["a", "b"]
        );
        assert!(keys_of(&a(&["FROB", "x"])).is_none());
        assert_eq!(
            stable("emq:{q}:job:j0000000000000012 x"),
            "emq:{q}:job:<id> x"
        );
    }
}
