//! `MONITOR` lines, parsed: pure, no engine. A line is `1700000000.123456 [<db> <addr>] "CMD"
//! "arg" ...`; commands run inside a script appear as `[<db> lua] "CMD" ...`.

/// One parsed `MONITOR` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// When the engine ran it, in µs since the epoch (the line's leading timestamp): orders the
    /// lines of several nodes' monitors on one clock (they share the machine's).
    pub at_us: u64,
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
    let at_us = parse_stamp(&line[..open])?;
    let rest = &line[open + 2..];
    let quote = rest.find('"').unwrap_or(rest.len());
    let head = rest[..quote].trim_end();
    let head = head.strip_suffix(']')?;
    let (db, addr) = head.split_once(' ')?;
    let db = db.parse().ok()?;
    let args = parse_args(&rest[quote..])?;
    Some(Line {
        at_us,
        db,
        addr: addr.to_string(),
        args,
    })
}

/// `1700000000.123456` as µs.
fn parse_stamp(s: &str) -> Option<u64> {
    let (secs, frac) = s.trim().split_once('.').unwrap_or((s.trim(), "0"));
    let frac = format!("{frac:0<6}");
    Some(secs.parse::<u64>().ok()? * 1_000_000 + frac.get(..6)?.parse::<u64>().ok()?)
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

/// Commands that name no key (R4.13 does not judge them; R4.19's list does, through the ACL).
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
