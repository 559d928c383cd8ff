//! A fault-injecting TCP proxy between a connector and the engine, for G8's fault phase. The
//! harness starts one [`Proxy`] on loopback in front of a single engine and hands connectors its
//! url; a cluster has one in front of every node, announced to clients
//! (`engine::cluster`). An engine closing a connection (`CLIENT KILL`) closes the
//! client's side at once, idle or not, as a direct connection would show it. The proxy splits each client connection's byte
//! stream into RESP commands ([`resp::Splitter`]) and the engine's into replies, and counts both,
//! so a [`Rule`] can act on one exact command: the `skip + 1`-th command that matches its
//! [`Matcher`] (a name such as `EVALSHA`, a first argument such as a script's SHA, the n-th command
//! of its connection). The [`Fault`]s:
//!
//! - [`Fault::LostReply`]: forward the command, read the engine's whole reply, then close the
//!   client's side without forwarding it: the command ran, the caller cannot know;
//! - [`Fault::DropBefore`]: close before the command is forwarded: it never ran;
//! - [`Fault::CutReply`]: forward the first half of the reply's bytes, then close;
//! - [`Fault::Delay`]: hold the reply, then forward it (past a short connector timeout);
//! - [`Fault::ResetOnConnect`]: accept the next connection and close it before reading a byte.
//!
//! Beside the faults, [`Proxy::hold`] withholds every reply to the commands a matcher picks until
//! `until` of them have arrived (or none arrived for a quiet period), so G5 judges pipelining by
//! what a connector sends before it has any reply, never by how fast the engine reads; and
//! [`Proxy::rewrite_error`] replaces the text of the engine's error replies of one code
//! (`NOSCRIPT`), keeping the code and the framing, so G3 judges a connector that recognises an
//! error by more than its code.
//!
//! A connection that stops being one reply per command (a replica's `PSYNC`, a subscription,
//! `MONITOR`: [`resp::Command::ends_commands`]) is relayed byte for byte from that command on,
//! unfaulted: a Sentinel's replicas replicate, and its Sentinels hear each other, through the
//! proxies they announce (`engine::sentinel`).
//!
//! Everything before the faulted command keeps its order and its reply, and nothing after it is
//! forwarded, so when the caller's call returns, the engine's state is settled: a rule fires on the
//! same command on every run, whatever the timing.
//!
//! **Why not a crate.** `noxious` (a Rust port of Toxiproxy, on tokio) and Toxiproxy itself
//! (through `toxiproxy_rust`, a client for the Go server) act on bytes and time per direction:
//! latency, bandwidth, slicer, limit_data, timeout, slow_close, reset_peer. None knows where a
//! command or a reply begins and ends, so none can "forward command n, swallow its reply"; a
//! byte-count toxic would depend on each connector's handshake and pipelining. RESP framing is
//! small, and std threads with a `TcpListener` are enough for loopback connections.

mod commands;
mod hold;
mod replies;
pub mod resp;
mod rewrite;
mod rule;

pub use rule::{Fault, Fired, Matcher, Rule};

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use hold::Hold;

#[derive(Default)]
struct State {
    hold: Option<Hold>,
    rules: Vec<Rule>,
    fired: Vec<Fired>,
    /// Each live connection's client and upstream sockets, by connection number, for
    /// [`Proxy::close_all`]; removed when the connection ends (else its two descriptors stay open
    /// as long as the proxy: thousands in a long gate run).
    open: std::collections::BTreeMap<u64, (TcpStream, TcpStream)>,
    conns: u64,
    commands: u64,
    /// New connections are closed at once (a node the harness restarts, until it has rejoined).
    refusing: bool,
    /// Connections numbered up to this one answer every `EVALSHA` with `-READONLY` and forward
    /// nothing more ([`Proxy::readonly_before_now`]); 0: none.
    readonly_upto: u64,
    /// `-READONLY` replies given so far.
    readonly_given: u64,
    /// Delayed replies whose delay has passed (sent, or their client gone).
    delayed_out: u64,
    /// Commands answered by the proxy itself, never forwarded ([`Proxy::answer`]): a command
    /// name and first argument (lower case), and the reply's bytes.
    answers: Vec<(String, String, Arc<[u8]>)>,
    /// New connections are read and never answered ([`Proxy::mute`]).
    muting: bool,
    /// Each connection's commands while journaling ([`Proxy::journal`]); `None`: not journaling.
    journal: Option<std::collections::BTreeMap<u64, Vec<resp::Command>>>,
    /// Error replies whose text is replaced ([`Proxy::rewrite_error`]); `None`: none.
    rewrite: Option<rewrite::Rewrite>,
}

struct Shared {
    upstream: SocketAddr,
    state: Mutex<State>,
    /// Signalled when a held command arrives.
    arrived: Condvar,
    stopping: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The proxy: a loopback listener forwarding to the engine, with rules armed by the harness.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// On a TLS engine: the TLS front connectors connect to (SPEC §10); the proxy is its inside.
    front: Option<crate::tls::relay::Front>,
}

/// What the reply side does with the reply to one forwarded command.
enum Action {
    Forward,
    Lose,
    Cut,
    Delay(Duration),
    /// Close once the replies before it are forwarded (the command was not sent).
    Close,
    /// Forward once the hold's window (its number) closes ([`Proxy::hold`]).
    Held(u32),
    /// Answer these bytes instead of an engine reply (the command was not forwarded).
    Inject(Arc<[u8]>),
    /// From here on relay the engine's bytes as they come ([`resp::Command::ends_commands`]).
    Tunnel,
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and forwards every connection to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> std::io::Result<Self> {
        let upstream = std::net::ToSocketAddrs::to_socket_addrs(upstream)?
            .next()
            .ok_or_else(|| std::io::Error::other(format!("no address for {upstream}")))?;
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
            stopping: AtomicBool::new(false),
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name("emq-proxy-accept".into())
            .spawn(move || accept(listener, s))?;
        Ok(Self {
            addr,
            shared,
            front: None,
        })
    }

    /// [`Proxy::start`] behind a TLS front ([`crate::tls::relay::Front`]): connectors speak TLS to the front,
    /// which hands the proxy plaintext; `upstream` is a plaintext way to the engine (a
    /// [`crate::tls::relay::Back`]).
    pub fn start_tls(upstream: &str, run: &Arc<crate::tls::RunTls>) -> std::io::Result<Self> {
        let mut proxy = Self::start(upstream)?;
        proxy.front = Some(crate::tls::relay::Front::start(run, proxy.addr)?);
        Ok(proxy)
    }

    /// The port connectors connect to: the TLS front's, else the proxy's own.
    pub fn port(&self) -> u16 {
        self.front
            .as_ref()
            .map_or(self.addr.port(), crate::tls::relay::Front::port)
    }

    /// The TLS front, on a TLS engine.
    pub fn front(&self) -> Option<&crate::tls::relay::Front> {
        self.front.as_ref()
    }

    /// `url` (an engine url at `host:port`) pointed at the proxy instead; a url elsewhere, or no
    /// engine url, is left as it is. Behind a TLS front the url keeps its host (the name the
    /// certificate gives) and only its port changes.
    pub fn url_for(&self, url: &str, host: &str, port: u16) -> String {
        match crate::protocol::url::EngineUrl::parse(url) {
            Ok(u) if self.front.is_some() => u.with_port(self.port()).to_string(),
            Ok(u) if u.host == host && u.port == Some(port) => crate::protocol::url::EngineUrl {
                host: "127.0.0.1".into(),
                ..u.with_port(self.port())
            }
            .to_string(),
            _ => url.to_string(),
        }
    }

    /// Arms a rule.
    pub fn arm(&self, rule: Rule) {
        self.shared.lock().rules.push(rule);
    }

    /// Disarms every rule that has not fired; returns them.
    pub fn disarm(&self) -> Vec<Rule> {
        std::mem::take(&mut self.shared.lock().rules)
    }

    /// The faults fired since the last call.
    pub fn take_fired(&self) -> Vec<Fired> {
        std::mem::take(&mut self.shared.lock().fired)
    }

    /// Delayed replies ([`Fault::Delay`]) that have gone out so far.
    pub fn delays_out(&self) -> u64 {
        self.shared.lock().delayed_out
    }

    /// Waits until [`Proxy::delays_out`] reaches `n`, or `within` passed; true when it did. A gate that must judge after a held reply arrived waits for that, not
    /// for a fixed time.
    pub fn wait_delays_out(&self, n: u64, within: Duration) -> bool {
        let t0 = std::time::Instant::now();
        loop {
            if self.shared.lock().delayed_out >= n {
                return true;
            }
            if t0.elapsed() >= within {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs `call` with the reply to the first command `matcher` names held for `hold`, and
    /// returns once that reply has gone out (whatever the caller did meanwhile: waited for it,
    /// gave up, or dropped the connection), within `hold` and a margin. A late reply's checks
    /// judge the state after it arrived, never a fixed time.
    pub fn with_late_reply<R>(
        &self,
        matcher: Matcher,
        hold: Duration,
        call: impl FnOnce() -> R,
    ) -> R {
        let out_before = self.delays_out();
        self.arm(Rule {
            matcher,
            skip: 0,
            fault: Fault::Delay(hold),
        });
        let r = call();
        self.wait_delays_out(out_before + 1, hold + Duration::from_millis(200));
        r
    }

    /// Connections accepted and commands seen so far.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.shared.lock();
        (s.conns, s.commands)
    }

    /// While `on`, every new connection is closed at once, before a byte is read; open ones stay.
    pub fn refuse(&self, on: bool) {
        self.shared.lock().refusing = on;
    }

    /// From now on, every connection already open answers each `EVALSHA` with
    /// `-READONLY You can't write against a read only replica.` and forwards nothing: what a
    /// client meets whose connection still reaches a primary that was demoted (through an
    /// endpoint that kept pointing at it). Connections opened later are forwarded as before.
    pub fn readonly_before_now(&self) {
        let mut s = self.shared.lock();
        s.readonly_upto = s.conns;
    }

    /// Ends [`Proxy::readonly_before_now`]; returns how many `-READONLY` replies it gave.
    pub fn end_readonly(&self) -> u64 {
        let mut s = self.shared.lock();
        s.readonly_upto = 0;
        std::mem::take(&mut s.readonly_given)
    }

    /// From now on the proxy answers `name arg1` itself with `reply` (RESP bytes), on every
    /// connection, and forwards nothing of it: a Sentinel that names a replica as the primary
    /// (SPEC R11.2). Ended by [`Proxy::end_answers`].
    pub fn answer(&self, name: &str, arg1: &str, reply: &[u8]) {
        self.shared.lock().answers.push((
            name.to_ascii_uppercase(),
            arg1.to_ascii_lowercase(),
            Arc::from(reply),
        ));
    }

    /// Ends every [`Proxy::answer`].
    pub fn end_answers(&self) {
        self.shared.lock().answers.clear();
    }

    /// While `on`, each new connection is accepted and read, and nothing of it goes to the
    /// engine or back: a server that hangs (a Sentinel stopped but for its socket, SPEC R11.1).
    /// Its connections stay open until their client closes them.
    pub fn mute(&self, on: bool) {
        self.shared.lock().muting = on;
    }

    /// Starts recording every command of every connection ([`Proxy::take_journal`]).
    pub fn journal(&self) {
        self.shared.lock().journal = Some(Default::default());
    }

    /// Stops recording; each connection's commands since [`Proxy::journal`], by connection.
    pub fn take_journal(&self) -> std::collections::BTreeMap<u64, Vec<resp::Command>> {
        self.shared.lock().journal.take().unwrap_or_default()
    }

    /// Closes every open connection (the listener stays).
    pub fn close_all(&self) {
        for (a, b) in std::mem::take(&mut self.shared.lock().open).into_values() {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.front = None;
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        self.close_all();
    }
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let conn = {
            let mut s = shared.lock();
            s.conns += 1;
            let conn = s.conns;
            if let Some(i) = s
                .rules
                .iter()
                .position(|r| r.fault == Fault::ResetOnConnect)
            {
                s.rules.remove(i);
                s.fired.push(Fired {
                    conn,
                    index: 0,
                    command: None,
                    fault: Fault::ResetOnConnect,
                });
                drop(s);
                let _ = client.shutdown(Shutdown::Both);
                continue;
            }
            if s.refusing {
                drop(s);
                let _ = client.shutdown(Shutdown::Both);
                continue;
            }
            if s.muting {
                drop(s);
                let _ = std::thread::Builder::new()
                    .name(format!("emq-proxy-{conn}-mute"))
                    .spawn(move || swallow(client));
                continue;
            }
            conn
        };
        let shared = shared.clone();
        let _ = std::thread::Builder::new()
            .name(format!("emq-proxy-{conn}"))
            .spawn(move || serve(conn, client, &shared));
    }
}

/// Runs one connection: this thread carries commands up; a second carries replies down.
fn serve(conn: u64, client: TcpStream, shared: &Arc<Shared>) {
    let Ok(upstream) = TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(5)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (Ok(c2), Ok(u2), Ok(c3), Ok(u3)) = (
        client.try_clone(),
        upstream.try_clone(),
        client.try_clone(),
        upstream.try_clone(),
    ) else {
        return;
    };
    shared.lock().open.insert(conn, (c3, u3));
    let (tx, rx) = mpsc::channel::<Action>();
    let s2 = shared.clone();
    let down = std::thread::Builder::new()
        .name(format!("emq-proxy-{conn}-down"))
        .spawn(move || replies::relay(u2, c2, rx, &s2));
    commands::up(conn, client, upstream, shared, tx);
    if let Ok(d) = down {
        let _ = d.join();
    }
    shared.lock().open.remove(&conn);
}

/// A muted connection: read until the client closes, answer nothing.
fn swallow(mut client: TcpStream) {
    let mut buf = [0u8; 4096];
    while matches!(std::io::Read::read(&mut client, &mut buf), Ok(n) if n > 0) {}
}

fn close(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}

/// How long the reply side waits for a command or the engine before looking again.
const IDLE_PEEK: Duration = Duration::from_millis(25);
