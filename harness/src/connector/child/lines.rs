//! A child's output read line by line with bounded memory: a reply line past [`MAX_LINE`] is
//! measured, never held; a stderr line is cut at [`MAX_LOG_LINE`]; and a reply line's bytes past
//! [`SPILL`] wait in a temporary file until the line ends, so many processes each in the middle
//! of a long line (every process of a connector that answers its first `connect` with 200 MB)
//! hold a mebibyte each, not a line limit each.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::LOG_LINES;

/// The longest reply line a connector may print (SPEC §5): a longer one is a connector failure,
/// and its bytes are skipped, never held, so the harness's memory stays bounded whatever the
/// connector writes. The largest legitimate reply (a `pipeline_probe` of 1 000 000 replies) is
/// under 8 MiB.
pub const MAX_LINE: usize = 16 << 20;
/// A stderr line longer than this is cut in the log (the rest is skipped unread into memory).
const MAX_LOG_LINE: usize = 2000;
/// Reply lines read ahead of the harness: past this the reader stops reading, so a connector that
/// floods stdout blocks on its own pipe instead of filling the harness's memory.
pub(super) const STDOUT_BACKLOG: usize = 4;

/// One stdout line of the child: its text, or the length it reached past [`MAX_LINE`].
#[derive(Debug)]
pub(super) enum Line {
    Text(String),
    TooLong(usize),
}

impl Line {
    /// The text, or what it was, for a message.
    pub(super) fn shown(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::TooLong(n) => format!("[a line of {n} bytes]"),
        }
    }
}

/// The last [`LOG_LINES`] lines of the child's stderr, filled by a reader thread.
pub(super) type Ring = Arc<Mutex<VecDeque<String>>>;

pub(super) fn push_line(ring: &Ring, line: String) {
    let mut r = ring.lock().unwrap_or_else(|e| e.into_inner());
    if r.len() >= LOG_LINES {
        r.pop_front();
    }
    r.push_back(line);
}

/// A reply line's bytes past this go to a temporary file until the line ends. Measured: a run
/// whose every connector process began with a 200 MB line peaked at 125–213 MB beside a busy
/// machine with each process's line held in memory up to [`MAX_LINE`] (about twenty of them at
/// once), against 100 MB allowed (`tests/misbehaving.rs`).
const SPILL: usize = 1 << 20;

/// The bytes of the line being read: in memory up to [`SPILL`], then in a temporary file
/// (deleted when dropped). Written by hand: no crate holds a buffer that spills to disk.
#[derive(Default)]
struct Held {
    mem: Vec<u8>,
    file: Option<File>,
    len: usize,
    /// The temporary file failed for this line: the rest of it stays in memory.
    in_memory: bool,
}

impl Held {
    fn clear(&mut self) {
        self.mem.clear();
        if self.mem.capacity() > SPILL {
            self.mem = Vec::new();
        }
        self.file = None;
        self.len = 0;
        self.in_memory = false;
    }

    /// Adds `bytes`; where the temporary file cannot be made or written (no room, no temporary
    /// folder), the line goes on in memory, as before the spill existed: the harness's own disk
    /// is never a reason to judge the connector.
    fn push(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.file.is_none() && !self.in_memory && self.mem.len() + bytes.len() > SPILL {
            match tempfile::tempfile().and_then(|mut f| f.write_all(&self.mem).map(|()| f)) {
                Ok(f) => {
                    self.mem = Vec::new();
                    self.file = Some(f);
                }
                Err(_) => self.in_memory = true,
            }
        }
        if let Some(f) = &mut self.file
            && f.write_all(bytes).is_err()
        {
            f.set_len(self.len as u64)?; // what the failed write left goes
            self.mem = self.take()?;
            self.in_memory = true;
        }
        if self.file.is_none() {
            self.mem.extend_from_slice(bytes);
        }
        self.len += bytes.len();
        Ok(())
    }

    /// The whole line, read back from its file where it spilled.
    fn take(&mut self) -> std::io::Result<Vec<u8>> {
        let Some(mut f) = self.file.take() else {
            return Ok(std::mem::take(&mut self.mem));
        };
        let mut all = Vec::with_capacity(self.len);
        f.seek(SeekFrom::Start(0))?;
        f.read_to_end(&mut all)?;
        Ok(all)
    }
}

/// Reads one `\n`-terminated line (`\r\n` tolerated) into `held`, keeping at most `limit`
/// bytes of it; the rest is consumed, not stored. Returns the line's whole length, or `None` at
/// EOF.
fn next_line(
    r: &mut impl BufRead,
    held: &mut Held,
    limit: usize,
) -> std::io::Result<Option<usize>> {
    held.clear();
    let mut total = 0usize;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = limit.saturating_sub(held.len);
        held.push(&chunk[..take.min(room)])?;
        total += take;
        r.consume(take);
        if done {
            return Ok(Some(total));
        }
    }
}

/// The text of a line's bytes (lossy UTF-8), its line end taken off.
fn line_text(bytes: Vec<u8>) -> String {
    let mut s = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    while s.ends_with('\n') || s.ends_with('\r') {
        s.pop();
    }
    s
}

pub(super) fn read_lines(stdout: impl Read, out: SyncSender<Line>, answered: &OnceLock<Instant>) {
    let mut r = BufReader::with_capacity(1 << 16, stdout);
    let mut held = Held::default();
    // The limit is on the text; its `\r\n` does not count.
    while let Ok(Some(total)) = next_line(&mut r, &mut held, MAX_LINE + 2) {
        answered.get_or_init(Instant::now);
        let line = if total > MAX_LINE + 2 {
            Line::TooLong(total)
        } else {
            match held.take() {
                Ok(bytes) => Line::Text(line_text(bytes)),
                Err(_) => return, // the temporary file failed: as if the pipe had
            }
        };
        if out.send(line).is_err() {
            return;
        }
    }
}

pub(super) fn read_log(stderr: impl Read, ring: &Ring) {
    let mut r = BufReader::new(stderr);
    let mut held = Held::default();
    while let Ok(Some(total)) = next_line(&mut r, &mut held, MAX_LOG_LINE + 1) {
        let Ok(bytes) = held.take() else { return };
        let mut line = line_text(bytes);
        if total > MAX_LOG_LINE + 1 || line.len() > MAX_LOG_LINE {
            let cut = (0..=MAX_LOG_LINE)
                .rev()
                .find(|&i| line.is_char_boundary(i))
                .unwrap_or(0);
            line.truncate(cut);
            line.push_str(" [cut]");
        }
        push_line(ring, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], cap: usize, limit: usize) -> Vec<(usize, String)> {
        let mut r = BufReader::with_capacity(cap, input);
        let mut held = Held::default();
        let mut got = Vec::new();
        while let Some(n) = next_line(&mut r, &mut held, limit).unwrap() {
            got.push((n, line_text(held.take().unwrap())));
        }
        got
    }

    #[test]
    fn lines_are_split_and_cut() {
        let got: Vec<String> = lines(b"a\r\nbb\nlast", 8192, 100)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(got, ["a", "bb", "last"]);
    }

    #[test]
    fn a_long_line_is_measured_whole_but_kept_short() {
        let got = lines(b"abcdefghij\nk\n", 4, 3);
        assert_eq!(got, [(11, "abc".to_string()), (2, "k".to_string())]);
    }

    #[test]
    fn a_line_whose_spill_failed_stays_in_memory_whole() {
        // As if the temporary file could not be made for this line.
        let mut held = Held {
            in_memory: true,
            ..Held::default()
        };
        let part = vec![b'y'; SPILL];
        for bytes in [&part[..], &part[..], b"\n"] {
            held.push(bytes).unwrap();
        }
        assert!(held.file.is_none());
        assert_eq!(held.take().unwrap().len(), 2 * SPILL + 1);
    }

    #[test]
    fn a_line_past_the_spill_comes_back_whole_and_the_next_from_memory() {
        let long = "x".repeat(3 * SPILL + 5);
        let input = format!("{long}\nshort\n");
        let mut r = BufReader::with_capacity(1 << 16, input.as_bytes());
        let mut held = Held::default();
        assert_eq!(
            next_line(&mut r, &mut held, MAX_LINE).unwrap(),
            Some(long.len() + 1)
        );
        assert!(held.file.is_some() && held.mem.capacity() <= SPILL);
        assert_eq!(line_text(held.take().unwrap()), long);
        assert_eq!(next_line(&mut r, &mut held, MAX_LINE).unwrap(), Some(6));
        assert!(held.file.is_none());
        assert_eq!(line_text(held.take().unwrap()), "short");
    }
}
