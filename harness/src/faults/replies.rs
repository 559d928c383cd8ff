//! Engine → client: one reply per forwarded command, each handled as its action says.

use std::io::ErrorKind::{TimedOut, WouldBlock};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;

use super::hold::wait_for_release;
use super::resp::value_len;
use super::{Action, IDLE_PEEK, Shared, close};

/// What the reply side does next.
enum Next {
    Act(Action),
    /// Nothing asked for: looked at the engine, look again.
    Idle,
    Stop,
}

pub(super) fn relay(
    mut upstream: TcpStream,
    mut client: TcpStream,
    rx: mpsc::Receiver<Action>,
    shared: &Shared,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    // A read (or the idle peek below) gives up after IDLE_PEEK and looks again.
    let _ = upstream.set_read_timeout(Some(IDLE_PEEK));
    // Bytes no command is owed (an action is queued before its command goes up): pause, not spin.
    let mut unowed = false;
    loop {
        let action = match next(&rx, &upstream, &mut unowed) {
            Next::Act(a) => a,
            Next::Idle => continue,
            Next::Stop => break,
        };
        if let Action::Close = action {
            break;
        }
        if let Action::Tunnel = action {
            tunnel(&mut upstream, &mut client, &buf);
            break;
        }
        if let Action::Inject(bytes) = action {
            if client.write_all(&bytes).is_err() {
                break;
            }
            continue;
        }
        let Some(n) = next_reply(&mut upstream, &mut buf, &mut chunk) else {
            break;
        };
        let mut reply: Vec<u8> = buf.drain(..n).collect();
        if let Some(rewritten) = super::rewrite::apply(shared, &reply) {
            reply = rewritten;
        }
        if !deliver(&mut client, shared, action, &reply) {
            break;
        }
    }
    let _ = client.flush();
    close(&client, &upstream);
}

/// After a command that ends the pairing of commands and replies (`PSYNC`, `SUBSCRIBE`): the
/// bytes already read, then the engine's bytes as they come, until either side closes.
fn tunnel(upstream: &mut TcpStream, client: &mut TcpStream, read: &[u8]) {
    if client.write_all(read).is_err() {
        return;
    }
    let _ = upstream.set_read_timeout(None);
    let _ = std::io::copy(upstream, client);
}

fn waiting(e: &std::io::Error) -> bool {
    matches!(e.kind(), WouldBlock | TimedOut)
}

/// The next command's action or, with none queued, a look at the engine.
fn next(rx: &mpsc::Receiver<Action>, upstream: &TcpStream, unowed: &mut bool) -> Next {
    match rx.try_recv() {
        Ok(a) => {
            *unowed = false;
            Next::Act(a)
        }
        Err(mpsc::TryRecvError::Disconnected) => Next::Stop,
        Err(mpsc::TryRecvError::Empty) => {
            if std::mem::take(unowed) {
                std::thread::sleep(IDLE_PEEK);
            }
            // Idle: wait on the engine, so that its closing the connection (CLIENT KILL)
            // closes the client's side at once, not at its next call; a reply ends the wait.
            match upstream.peek(&mut [0u8; 1]) {
                Ok(0) => Next::Stop,
                Err(e) if !waiting(&e) => Next::Stop,
                Ok(_) => {
                    *unowed = true;
                    Next::Idle
                }
                Err(_) => Next::Idle,
            }
        }
    }
}

/// Reads until one whole reply is buffered; returns its length.
fn next_reply(upstream: &mut TcpStream, buf: &mut Vec<u8>, chunk: &mut [u8]) -> Option<usize> {
    loop {
        match value_len(buf) {
            Ok(Some(n)) => return Some(n),
            Ok(None) => {}
            Err(_) => return None,
        }
        match upstream.read(chunk) {
            Ok(0) => return None,
            Err(e) if waiting(&e) => {}
            Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Hands the reply to the client as the action says; `false` ends the connection.
fn deliver(client: &mut TcpStream, shared: &Shared, action: Action, reply: &[u8]) -> bool {
    match action {
        Action::Forward => client.write_all(reply).is_ok(),
        Action::Held(window) => {
            wait_for_release(shared, window);
            client.write_all(reply).is_ok()
        }
        Action::Delay(d) => {
            std::thread::sleep(d);
            let sent = client.write_all(reply).is_ok();
            shared.lock().delayed_out += 1;
            sent
        }
        Action::Cut => {
            let _ = client.write_all(&reply[..reply.len() / 2]);
            false
        }
        Action::Lose | Action::Close => false,
        Action::Inject(bytes) => client.write_all(&bytes).is_ok(),
        Action::Tunnel => false,
    }
}
