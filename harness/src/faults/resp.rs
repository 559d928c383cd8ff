//! RESP framing, just enough for the fault proxy: where one value ends in a byte buffer (RESP2
//! and RESP3 replies), and a splitter that cuts a client's byte stream into whole commands, however
//! the bytes arrived (pipelined, split at any boundary).

/// A malformed stream: the proxy closes the connection rather than guess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed RESP: {}", self.0)
    }
}

/// Nesting deeper than this is refused (no real reply or command comes near).
const MAX_DEPTH: usize = 64;

/// The end of the CRLF-terminated line starting at `from`: (index of `\r`, index after `\n`).
fn line(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let rel = buf.get(from..)?.windows(2).position(|w| w == b"\r\n")?;
    Some((from + rel, from + rel + 2))
}

fn number(bytes: &[u8]) -> Result<i64, Malformed> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Malformed(format!("bad length {:?}", String::from_utf8_lossy(bytes))))
}

/// The length of the first complete RESP value in `buf`: `Ok(None)` while it is incomplete.
pub fn value_len(buf: &[u8]) -> Result<Option<usize>, Malformed> {
    value_end(buf, 0, 0)
}

fn value_end(buf: &[u8], at: usize, depth: usize) -> Result<Option<usize>, Malformed> {
    if depth > MAX_DEPTH {
        return Err(Malformed("nested too deep".into()));
    }
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some((cr, next)) = line(buf, at + 1) else {
        return Ok(None);
    };
    let head = &buf[at + 1..cr];
    match kind {
        b'+' | b'-' | b':' | b',' | b'(' | b'#' | b'_' => Ok(Some(next)),
        b'$' | b'=' | b'!' => {
            let n = number(head)?;
            if n < 0 {
                return Ok(Some(next));
            }
            let end = next + n as usize + 2;
            if buf.len() < end {
                return Ok(None);
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err(Malformed("bulk string without its CRLF".into()));
            }
            Ok(Some(end))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = number(head)?;
            if n < 0 {
                return Ok(Some(next));
            }
            let items = if matches!(kind, b'%' | b'|') {
                2 * n
            } else {
                n
            };
            let mut pos = next;
            for _ in 0..items {
                match value_end(buf, pos, depth + 1)? {
                    Some(end) => pos = end,
                    None => return Ok(None),
                }
            }
            if kind == b'|' {
                // An attribute map precedes the value it annotates.
                return value_end(buf, pos, depth + 1);
            }
            Ok(Some(pos))
        }
        other => Err(Malformed(format!("unknown type byte {:?}", other as char))),
    }
}

/// One whole command from a client: its bytes exactly as sent, and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub raw: Vec<u8>,
    pub args: Vec<Vec<u8>>,
}

impl Command {
    /// The command name, upper-case (`EVALSHA`).
    pub fn name(&self) -> String {
        self.args
            .first()
            .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
            .unwrap_or_default()
    }

    /// True when the connection stops being one reply per command after it: a replica's
    /// `PSYNC`/`SYNC` (a replication stream follows, and the replica's acknowledgements, which
    /// get no reply), a subscription (messages arrive unasked: a Sentinel's hello channel on a
    /// data node, a client's `+switch-master`), `MONITOR`. The proxy relays such a connection's
    /// bytes as they are from then on (it can no longer pair a command with its reply).
    pub fn ends_commands(&self) -> bool {
        matches!(
            self.name().as_str(),
            "PSYNC" | "SYNC" | "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE" | "MONITOR"
        )
    }

    /// The first argument, if any, lower-case (a script's SHA for `EVALSHA`).
    pub fn arg1(&self) -> Option<String> {
        self.args
            .get(1)
            .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
    }

    /// `EVALSHA 47625d81… (complete)`: the name and a short first argument, for evidence; a
    /// script's SHA names the script of `bundle`, the way its author knows it.
    pub fn label(&self, bundle: &crate::protocol::bundle::Bundle) -> String {
        match self.arg1() {
            Some(a) if self.name() == "EVALSHA" => format!("EVALSHA {}", bundle.sha_label(&a)),
            Some(a) => format!("{} {}", self.name(), a.chars().take(8).collect::<String>()),
            None => self.name(),
        }
    }
}

/// Cuts a client's byte stream into commands: feed bytes as they arrive, take whole commands out.
#[derive(Debug, Default)]
pub struct Splitter {
    buf: Vec<u8>,
}

impl Splitter {
    /// Appends bytes read from the client.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not yet make a whole command.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Every byte held, taken out: what follows a command after which the stream is no longer
    /// commands ([`Command::ends_commands`]).
    pub fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// The next whole command, `Ok(None)` until one is complete. Commands are arrays of bulk
    /// strings; an inline command (a bare line, as `valkey-cli` may send) is split on spaces.
    pub fn next_command(&mut self) -> Result<Option<Command>, Malformed> {
        let Some(&first) = self.buf.first() else {
            return Ok(None);
        };
        if first != b'*' {
            let Some(nl) = self.buf.iter().position(|b| *b == b'\n') else {
                return Ok(None);
            };
            let raw: Vec<u8> = self.buf.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&raw);
            let args = text
                .split_ascii_whitespace()
                .map(|s| s.as_bytes().to_vec())
                .collect();
            return Ok(Some(Command { raw, args }));
        }
        let Some(end) = value_len(&self.buf)? else {
            return Ok(None);
        };
        let raw: Vec<u8> = self.buf.drain(..end).collect();
        let args = bulk_args(&raw)?;
        Ok(Some(Command { raw, args }))
    }
}

/// The arguments of one complete `*n` array of bulk strings.
fn bulk_args(raw: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    let (cr, mut pos) = line(raw, 1).ok_or_else(|| Malformed("truncated".into()))?;
    let n = number(&raw[1..cr])?.max(0) as usize;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        if raw.get(pos) != Some(&b'$') {
            return Err(Malformed(
                "a command argument that is not a bulk string".into(),
            ));
        }
        let (cr, next) = line(raw, pos + 1).ok_or_else(|| Malformed("truncated".into()))?;
        let len = number(&raw[pos + 1..cr])?.max(0) as usize;
        args.push(raw[next..next + len].to_vec());
        pos = next + len + 2;
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    fn split_all(chunks: &[&[u8]]) -> Vec<Vec<String>> {
        let mut s = Splitter::default();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c);
            while let Some(c) = s.next_command().unwrap() {
                out.push(
                    c.args
                        .iter()
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect(),
                );
            }
        }
        assert_eq!(s.buffered(), 0);
        out
    }

    #[test]
    fn replication_and_subscriptions_end_the_commands_and_keep_what_follows() {
        let mut s = Splitter::default();
        s.feed(&cmd(&["REPLCONF", "capa", "eof"]));
        s.feed(&cmd(&["psync", "?", "-1"]));
        s.feed(b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK");
        let first = s.next_command().unwrap().unwrap();
        assert!(!first.ends_commands());
        let psync = s.next_command().unwrap().unwrap();
        assert!(psync.ends_commands());
        assert_eq!(s.take_rest(), b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK");
        assert_eq!(s.buffered(), 0);
        for name in ["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR", "SYNC"] {
            s.feed(&cmd(&[name, "x"]));
            assert!(s.next_command().unwrap().unwrap().ends_commands(), "{name}");
        }
        s.feed(&cmd(&["EVALSHA", "x"]));
        assert!(!s.next_command().unwrap().unwrap().ends_commands());
    }

    #[test]
    fn values_of_every_type() {
        for v in [
            &b"+OK\r\n"[..],
            b"-NOSCRIPT No matching script\r\n",
            b":42\r\n",
            b"$5\r\nhello\r\n",
            b"$-1\r\n",
            b"$0\r\n\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*3\r\n$17\r\nj0000000000000001\r\n$5\r\nhe\r\no\r\n:1\r\n",
            b"*2\r\n*1\r\n:1\r\n$1\r\nx\r\n",
            b"%1\r\n+a\r\n:1\r\n",
            b"~2\r\n+a\r\n+b\r\n",
            b">2\r\n+message\r\n+x\r\n",
            b"_\r\n",
            b"#t\r\n",
            b",3.14\r\n",
            b"(12345678901234567890\r\n",
            b"=7\r\ntxt:abc\r\n",
            b"|1\r\n+ttl\r\n:3\r\n:7\r\n",
        ] {
            assert_eq!(
                value_len(v),
                Ok(Some(v.len())),
                "{}",
                String::from_utf8_lossy(v)
            );
            for cut in 0..v.len() {
                assert_eq!(
                    value_len(&v[..cut]),
                    Ok(None),
                    "{cut} of {:?}",
                    String::from_utf8_lossy(v)
                );
            }
            let mut two = v.to_vec();
            two.extend_from_slice(b":1\r\n");
            assert_eq!(value_len(&two), Ok(Some(v.len())));
        }
        assert!(value_len(b"?\r\n").is_err());
        assert!(value_len(b"$x\r\n").is_err());
        assert!(value_len(b"$2\r\nabcd\r\n").is_err());
    }

    #[test]
    fn pipelined_commands_split_at_every_boundary() {
        let mut stream = Vec::new();
        let want: Vec<Vec<String>> = vec![
            vec!["HELLO".into()],
            vec![
                "EVALSHA".into(),
                "d9fe".into(),
                "3".into(),
                "a\r\nb".into(),
                String::new(),
            ],
            vec!["ZCARD".into(), "emq:{q}:pending".into()],
            vec!["PING".into()],
        ];
        for args in &want {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            stream.extend(cmd(&a));
        }
        stream.extend_from_slice(b"PING extra\r\n");
        let mut want = want;
        want.push(vec!["PING".into(), "extra".into()]);
        // Whole, byte by byte, and cut once and twice at every position.
        assert_eq!(split_all(&[&stream]), want);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(split_all(&bytes), want);
        for i in 0..=stream.len() {
            assert_eq!(split_all(&[&stream[..i], &stream[i..]]), want, "cut at {i}");
            for j in (i..=stream.len()).step_by(7) {
                assert_eq!(
                    split_all(&[&stream[..i], &stream[i..j], &stream[j..]]),
                    want,
                    "cut at {i} and {j}"
                );
            }
        }
    }

    #[test]
    fn command_labels() {
        let mut s = Splitter::default();
        s.feed(&cmd(&["evalsha", "D9FEC2BF1492", "0"]));
        let c = s.next_command().unwrap().unwrap();
        assert_eq!(c.name(), "EVALSHA");
        assert_eq!(c.arg1().as_deref(), Some("d9fec2bf1492"));
        assert_eq!(c.raw, cmd(&["evalsha", "D9FEC2BF1492", "0"]));
        // The bundle's SHAs name their scripts; others say so.
        let b = crate::protocol::bundle::Bundle::load_default().unwrap();
        assert_eq!(c.label(&b), "EVALSHA d9fec2bf… (enqueue)");
        s.feed(&cmd(&["evalsha", "0123456789ab", "0"]));
        let c = s.next_command().unwrap().unwrap();
        assert_eq!(c.label(&b), "EVALSHA 01234567… (not a bundle script)");
        s.feed(&cmd(&["INCR", "probe"]));
        assert_eq!(s.next_command().unwrap().unwrap().label(&b), "INCR probe");
    }

    #[test]
    fn a_non_bulk_argument_is_malformed() {
        let mut s = Splitter::default();
        s.feed(b"*1\r\n:1\r\n");
        assert!(s.next_command().is_err());
    }
}
