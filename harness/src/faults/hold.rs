//! The hold ([`Proxy::hold`]): replies withheld until a connector has sent enough commands, so
//! G5 judges pipelining by what is sent before any reply. Its own concept beside the faults: it
//! delays replies in windows and never closes a connection.

use std::time::{Duration, Instant};

use super::resp::Command;
use super::{Matcher, Proxy, Shared};

/// Replies withheld until enough commands arrived ([`Proxy::hold`]), in up to `windows_left`
/// windows: each window ends when `until` commands arrived in it or none came for `quiet`.
pub(super) struct Hold {
    matcher: Matcher,
    until: u64,
    /// A window that held this many ends the hold: no window after it could judge more.
    enough: u64,
    quiet: Duration,
    /// The open window (from 0), and how many may still open after it.
    window: u32,
    windows_left: u32,
    /// Matching commands seen in the open window, and when the last one came.
    seen: u64,
    last: Instant,
    /// The most commands any window saw (capped at `until`), once a window closed.
    best: Option<u64>,
    /// Commands that arrived while the hold was open and did not match it, by name and first
    /// argument (`INCRBY emq-probe:7:held`), with their count: what a connector sent instead.
    others: std::collections::BTreeMap<String, u64>,
    /// Every window closed: replies flow.
    done: bool,
}

impl Proxy {
    /// Withholds the replies to commands `matcher` picks until `until` of them have arrived, or
    /// none arrived for `quiet`; then every reply flows. A connector that waits for a reply
    /// before its next command sends one and stalls until `quiet` lets it go.
    /// With `windows` above 1, a new window opens after each one closes (a connector may send a
    /// lone first call, then its pipelines), unless the one that closed held `enough`: the caller
    /// knows no later window can show more (so a correct connector pays one quiet wait, not two).
    pub fn hold(&self, matcher: Matcher, until: u64, quiet: Duration, windows: u32, enough: u64) {
        self.shared.lock().hold = Some(Hold {
            matcher,
            until,
            enough,
            quiet,
            window: 0,
            windows_left: windows.max(1),
            seen: 0,
            last: Instant::now(),
            best: None,
            others: Default::default(),
            done: false,
        });
        self.shared.arrived.notify_all();
    }

    /// The most held commands that arrived in one window before its replies were let go
    /// (`None`: no window closed), and the commands that arrived during the hold without matching
    /// it (most first, at most five kinds): evidence says what did arrive, not only what did not.
    /// Ends the hold.
    pub fn take_hold(&self) -> (Option<u64>, Vec<(String, u64)>) {
        let h = self.shared.lock().hold.take();
        self.shared.arrived.notify_all();
        let Some(h) = h else {
            return (None, Vec::new());
        };
        let mut others: Vec<(String, u64)> = h.others.into_iter().collect();
        others.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        others.truncate(5);
        (h.best, others)
    }
}

/// The window of the hold that withholds `cmd`'s reply, if one does (counting it as arrived).
pub(super) fn held(shared: &Shared, cmd: &Command, index: u64) -> Option<u32> {
    let mut s = shared.lock();
    let h = s.hold.as_mut().filter(|h| !h.done)?;
    if !h.matcher.matches(cmd, index) {
        let what = match cmd.arg1() {
            Some(a) => format!("{} {}", cmd.name(), a.chars().take(64).collect::<String>()),
            None => cmd.name(),
        };
        // Bounded: a connector that floods the proxy with distinct keys names a few of them.
        if h.others.len() < 64 || h.others.contains_key(&what) {
            *h.others.entry(what).or_default() += 1;
        }
        return None;
    }
    h.seen += 1;
    h.last = Instant::now();
    let window = h.window;
    drop(s);
    shared.arrived.notify_all();
    Some(window)
}

/// Waits until window `window` of the hold closes: `until` commands arrived in it, or none for
/// `quiet`. Closing it opens the next window, if any is left.
pub(super) fn wait_for_release(shared: &Shared, window: u32) {
    let mut s = shared.lock();
    loop {
        let Some(h) = s.hold.as_mut() else { return };
        if h.done || h.window != window {
            return;
        }
        let quiet_for = h.last.elapsed();
        if h.seen >= h.until || quiet_for >= h.quiet {
            let got = h.seen.min(h.until);
            h.best = Some(h.best.map_or(got, |b| b.max(got)));
            if h.windows_left > 1 && got < h.enough {
                h.windows_left -= 1;
                h.window += 1;
                h.seen = 0;
                h.last = Instant::now();
            } else {
                h.done = true;
            }
            shared.arrived.notify_all();
            return;
        }
        let wait = h.quiet - quiet_for;
        s = shared
            .arrived
            .wait_timeout(s, wait)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
}
