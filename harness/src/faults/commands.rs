//! Client → engine: each connection's byte stream split into commands, each command checked
//! against the armed rules and the `-READONLY` switch, and forwarded or faulted. The reply side
//! (`replies`) only carries out what this side decided.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;

use super::hold::held;
use super::resp::{Command, Splitter};
use super::{Action, Fault, Fired, Shared};

/// Client → engine: split into commands, apply the first rule that picks one, forward.
pub(super) fn up(
    conn: u64,
    mut client: TcpStream,
    mut upstream: TcpStream,
    shared: &Shared,
    tx: mpsc::Sender<Action>,
) {
    let mut split = Splitter::default();
    let mut index = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        split.feed(&buf[..n]);
        let (out, last) = route(&mut split, &mut index, conn, shared, &tx);
        if !out.is_empty() && upstream.write_all(&out).is_err() {
            break;
        }
        if let Some(action) = last {
            let tunnel = matches!(action, Action::Tunnel);
            // Nothing after the faulted command goes up; the reply side closes both ends.
            let _ = tx.send(action);
            if tunnel {
                // Everything after goes up as it comes, until either side closes.
                let _ = std::io::copy(&mut client, &mut upstream);
                super::close(&client, &upstream);
            }
            return;
        }
    }
    // The client went away: the reply side forwards what is owed, then closes.
    drop(tx);
}

/// The whole commands of one read: their bytes, which go up in one write as the client
/// pipelined them, and the action that ends the connection when a fault (or a framing error)
/// stops it; every other command's action is sent as it is decided.
fn route(
    split: &mut Splitter,
    index: &mut u64,
    conn: u64,
    shared: &Shared,
    tx: &mpsc::Sender<Action>,
) -> (Vec<u8>, Option<Action>) {
    let mut out = Vec::new();
    loop {
        let cmd = match split.next_command() {
            Ok(Some(c)) => c,
            Ok(None) => return (out, None),
            Err(_) => return (out, Some(Action::Close)),
        };
        *index += 1;
        if cmd.ends_commands() {
            out.extend_from_slice(&cmd.raw);
            out.extend(split.take_rest());
            return (out, Some(Action::Tunnel));
        }
        if let Some(reply) = answered(shared, conn, &cmd) {
            let _ = tx.send(Action::Inject(reply));
            continue;
        }
        let fault = pick(shared, conn, *index, &cmd);
        if fault == Some(Fault::DropBefore) {
            return (out, Some(Action::Close));
        }
        out.extend_from_slice(&cmd.raw);
        match fault {
            None | Some(Fault::ResetOnConnect) => {
                let _ = tx.send(match held(shared, &cmd, *index) {
                    Some(window) => Action::Held(window),
                    None => Action::Forward,
                });
            }
            Some(Fault::Delay(d)) => {
                let _ = tx.send(Action::Delay(d));
            }
            Some(Fault::LostReply) => return (out, Some(Action::Lose)),
            Some(Fault::CutReply) => return (out, Some(Action::Cut)),
            Some(Fault::DropBefore) => unreachable!("handled above"),
        }
    }
}

/// The reply of a demoted primary to a write ([`Proxy::readonly_before_now`]).
const READONLY: &[u8] = b"-READONLY You can't write against a read only replica.\r\n";

/// The proxy's own reply to `cmd` on connection `conn`, if it gives one: `-READONLY` to a script
/// ([`super::Proxy::readonly_before_now`], counted) or an [`super::Proxy::answer`]. Every
/// command is journaled here first ([`super::Proxy::journal`]).
fn answered(shared: &Shared, conn: u64, cmd: &Command) -> Option<std::sync::Arc<[u8]>> {
    let mut s = shared.lock();
    if let Some(j) = s.journal.as_mut() {
        j.entry(conn).or_default().push(cmd.clone());
    }
    if conn <= s.readonly_upto && cmd.name() == "EVALSHA" {
        s.readonly_given += 1;
        return Some(std::sync::Arc::from(READONLY));
    }
    let (name, arg1) = (cmd.name(), cmd.arg1().unwrap_or_default());
    s.answers
        .iter()
        .find(|(n, a, _)| *n == name && *a == arg1)
        .map(|(_, _, reply)| reply.clone())
}

/// The first armed rule that picks `cmd`, counting it against every rule it matches.
fn pick(shared: &Shared, conn: u64, index: u64, cmd: &Command) -> Option<Fault> {
    let mut s = shared.lock();
    s.commands += 1;
    let mut hit = None;
    for (i, r) in s.rules.iter_mut().enumerate() {
        if r.fault == Fault::ResetOnConnect || !r.matcher.matches(cmd, index) {
            continue;
        }
        if r.skip > 0 {
            r.skip -= 1;
            continue;
        }
        hit = Some(i);
        break;
    }
    let rule = s.rules.remove(hit?);
    s.fired.push(Fired {
        conn,
        index,
        command: Some(cmd.clone()),
        fault: rule.fault,
    });
    Some(rule.fault)
}
