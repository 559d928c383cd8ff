//! TLS in front of the fault proxy and behind it (SPEC §10): the [`Front`] terminates a
//! connector's TLS with a certificate of the run's CA and hands the plaintext to the proxy, so
//! every fault and hold works on RESP as it does without TLS; the [`Back`] takes plaintext on
//! loopback and speaks TLS to the engine, verifying its certificate with the run's CA (the
//! proxy's upstream and the harness's own admin connections).
//!
//! The front reads each connection's first byte before any handshake: a TLS connection begins
//! with a handshake record (`0x16`); anything else is a plaintext client (R10.2), recorded with
//! its first bytes and closed at once, never waited on. For one connection at a time it can be
//! told to present a certificate that must be refused (another CA, another name, expired;
//! R10.3, R10.4): it records whether the client completed the handshake, and forwards nothing.
//!
//! **Why tokio here.** A TLS session's reads and writes share one state, so the proxy's
//! thread-per-direction design cannot hold one; tokio-rustls with `copy_bidirectional` relays a
//! connection both ways in a few lines (tokio is in the tree already, through testcontainers).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::tls::{Leaf, Plaintext, RunTls, TLS_HOST};

/// The certificate the front presents to one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Present {
    /// The run's CA, for [`TLS_HOST`]: the one a connector must accept.
    Good,
    /// For [`TLS_HOST`], from a CA the connector was not given (R10.3).
    OtherCa,
    /// The run's CA, for another host (R10.4).
    OtherName,
    /// The run's CA, for [`TLS_HOST`], expired (R10.3: the chain does not verify).
    Expired,
}

impl Present {
    /// A short name, for figures.
    pub fn key(self) -> &'static str {
        match self {
            Self::Good => "good",
            Self::OtherCa => "other_ca",
            Self::OtherName => "other_name",
            Self::Expired => "expired",
        }
    }

    /// In words, for evidence.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Good => "the run's certificate",
            Self::OtherCa => "a certificate of another CA",
            Self::OtherName => "a certificate of the run's CA for another name (other.invalid)",
            Self::Expired => "an expired certificate of the run's CA",
        }
    }
}

/// A certificate that must be refused was presented to one connection: `completed`, the client
/// finished the handshake (it accepted it); else the client's error, as the front saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    pub conn: u64,
    pub present: Present,
    pub completed: bool,
    pub detail: String,
}

#[derive(Default)]
struct FrontState {
    /// The certificate every new connection gets until [`Front::present`] says otherwise
    /// (`None`: [`Present::Good`]). Sticky, as a real server's certificate is: a connector
    /// that tries again meets the same one.
    next: Option<Present>,
    presented: Vec<Presented>,
}

struct FrontShared {
    state: Mutex<FrontState>,
    conns: AtomicU64,
    /// Connections closed with no handshake: a plaintext first byte (R10.2), or none at all.
    /// Each is a connection the front is done with, as a presented one is ([`Front::settled`]).
    unshaken: AtomicU64,
    inner: SocketAddr,
    /// Where plaintext connections are recorded: the engine's run, shared by all its fronts.
    run: Arc<RunTls>,
    port: std::sync::OnceLock<u16>,
    good: Arc<rustls::ServerConfig>,
    other_ca: Arc<rustls::ServerConfig>,
    other_name: Arc<rustls::ServerConfig>,
    expired: Arc<rustls::ServerConfig>,
}

impl FrontShared {
    fn lock(&self) -> MutexGuard<'_, FrontState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn config(&self, p: Present) -> Arc<rustls::ServerConfig> {
        match p {
            Present::Good => self.good.clone(),
            Present::OtherCa => self.other_ca.clone(),
            Present::OtherName => self.other_name.clone(),
            Present::Expired => self.expired.clone(),
        }
    }
}

fn server_config(leaf: &Leaf) -> std::io::Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(std::io::Error::other)?;
    let key =
        PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).map_err(std::io::Error::other)?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(std::io::Error::other)?;
    Ok(Arc::new(config))
}

/// A runtime of one worker for one relay; dropped without waiting on its connections.
fn runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
}

fn listen() -> std::io::Result<(std::net::TcpListener, SocketAddr)> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    l.set_nonblocking(true)?;
    let addr = l.local_addr()?;
    Ok((l, addr))
}

/// How many first bytes of a plaintext connection are kept as evidence.
const EVIDENCE_BYTES: usize = 48;

/// TLS in, plaintext out to `inner` (the fault proxy).
pub struct Front {
    addr: SocketAddr,
    shared: Arc<FrontShared>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Front {
    /// Listens on `127.0.0.1:0` and relays each TLS connection, decrypted, to `inner`.
    pub fn start(tls: &Arc<RunTls>, inner: SocketAddr) -> std::io::Result<Self> {
        let shared = Arc::new(FrontShared {
            state: Mutex::default(),
            conns: AtomicU64::new(0),
            unshaken: AtomicU64::new(0),
            inner,
            run: tls.clone(),
            port: std::sync::OnceLock::new(),
            good: server_config(&tls.server)?,
            other_ca: server_config(&tls.other_ca)?,
            other_name: server_config(&tls.other_name)?,
            expired: server_config(&tls.expired)?,
        });
        let (listener, addr) = listen()?;
        let _ = shared.port.set(addr.port());
        let rt = runtime("emq-tls-front")?;
        let s = shared.clone();
        rt.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            while let Ok((tcp, _)) = listener.accept().await {
                let conn = s.conns.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(front_serve(conn, tcp, s.clone()));
            }
        });
        Ok(Self {
            addr,
            shared,
            rt: Some(rt),
        })
    }

    /// The front's port (what a connector's url names).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every new connection is presented `p` from now on ([`Present::Good`]: the run's own).
    pub fn present(&self, p: Present) {
        self.shared.lock().next = (p != Present::Good).then_some(p);
    }

    /// The certificates that must be refused presented since the last call, and what the
    /// clients did with them.
    pub fn take_presented(&self) -> Vec<Presented> {
        std::mem::take(&mut self.shared.lock().presented)
    }

    /// Connections accepted so far.
    pub fn conns(&self) -> u64 {
        self.shared.conns.load(Ordering::SeqCst)
    }

    /// Where the front stands now: what [`Front::settled`] counts from.
    pub fn mark(&self) -> Mark {
        Mark {
            conns: self.conns(),
            unshaken: self.shared.unshaken.load(Ordering::SeqCst),
        }
    }

    /// What the front saw of the connections opened since `since`: each ends as a presented
    /// handshake, or as one closed with no handshake (a plaintext first byte, R10.2, judged by
    /// the gate's plaintext check; or nothing sent), recorded by the front's own task a moment
    /// after the client gave up. Waited for up to ten times the client's own time `took` (at
    /// least 2 s), so a slow machine stretches the wait, never the verdict. A plaintext
    /// connection is the connection it is: counted as ended, never as a missing handshake.
    pub fn settled(&self, since: Mark, took: Duration) -> Result<Vec<Presented>, String> {
        let opened = self.conns() - since.conns;
        let deadline = std::time::Instant::now() + (took * 10).max(Duration::from_secs(2));
        let mut seen = self.take_presented();
        loop {
            let unshaken = self.shared.unshaken.load(Ordering::SeqCst) - since.unshaken;
            if ended(seen.len() as u64, unshaken, opened) {
                return Ok(seen);
            }
            if std::time::Instant::now() > deadline {
                return Err(format!(
                    "the TLS front saw {} of the {opened} connections it was given end: {} \
                     handshake(s), {unshaken} closed without one",
                    seen.len() as u64 + unshaken,
                    seen.len()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
            seen.extend(self.take_presented());
        }
    }
}

/// Where a front stood: its connections so far, and those it closed with no handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    conns: u64,
    unshaken: u64,
}

/// True when every one of `opened` connections has ended: `presented` with a handshake the
/// front recorded, `unshaken` closed before one (plaintext, or nothing sent).
fn ended(presented: u64, unshaken: u64, opened: u64) -> bool {
    presented + unshaken >= opened
}

impl Drop for Front {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

async fn front_serve(conn: u64, mut tcp: TcpStream, s: Arc<FrontShared>) {
    let _ = tcp.set_nodelay(true);
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await {
        Ok(1..) => {}
        _ => {
            s.unshaken.fetch_add(1, Ordering::SeqCst);
            return;
        }
    }
    if first[0] != 0x16 {
        // A plaintext client: keep what it sent first (it may be mid-write), then close.
        let mut bytes = vec![0u8; EVIDENCE_BYTES];
        let n = tokio::time::timeout(Duration::from_millis(50), tcp.read(&mut bytes))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(0);
        bytes.truncate(n.max(1));
        if n == 0 {
            bytes = first.to_vec();
        }
        s.run.record_plaintext(Plaintext {
            port: s.port.get().copied().unwrap_or(0),
            bytes,
        });
        s.unshaken.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let present = s.lock().next.unwrap_or(Present::Good);
    let accepted = TlsAcceptor::from(s.config(present)).accept(tcp).await;
    if present != Present::Good {
        // Nothing goes through a connection that must have been refused.
        let (completed, detail) = match &accepted {
            Ok(_) => (true, "the client completed the handshake".to_string()),
            Err(e) => (false, e.to_string()),
        };
        s.lock().presented.push(Presented {
            conn,
            present,
            completed,
            detail,
        });
        return;
    }
    let Ok(mut tls) = accepted else { return };
    let Ok(mut inner) = TcpStream::connect(s.inner).await else {
        return;
    };
    let _ = inner.set_nodelay(true);
    let _ = copy_bidirectional(&mut tls, &mut inner).await;
}

/// Plaintext in on loopback, TLS out to the engine (its certificate verified by the run's CA,
/// for [`TLS_HOST`]).
pub struct Back {
    addr: SocketAddr,
    rt: Option<tokio::runtime::Runtime>,
}

impl Back {
    /// Listens on `127.0.0.1:0` and relays each connection over TLS to `engine`.
    pub fn start(tls: &RunTls, engine: SocketAddr) -> std::io::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(tls.ca.cert_pem.as_bytes()) {
            roots
                .add(c.map_err(std::io::Error::other)?)
                .map_err(std::io::Error::other)?;
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = TlsConnector::from(Arc::new(config));
        let (listener, addr) = listen()?;
        let rt = runtime("emq-tls-back")?;
        rt.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            while let Ok((plain, _)) = listener.accept().await {
                tokio::spawn(back_serve(plain, engine, connector.clone()));
            }
        });
        Ok(Self { addr, rt: Some(rt) })
    }

    /// The back's plaintext address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Back {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

async fn back_serve(mut plain: TcpStream, engine: SocketAddr, connector: TlsConnector) {
    let _ = plain.set_nodelay(true);
    let Ok(tcp) = TcpStream::connect(engine).await else {
        return;
    };
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(TLS_HOST).expect("a DNS name");
    let Ok(mut tls) = connector.connect(name, tcp).await else {
        return;
    };
    let _ = copy_bidirectional(&mut plain, &mut tls).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The G1 bug: a connector that fell back to plaintext after a refused handshake opened two
    /// connections, one handshake and one plaintext; both ended, nothing is missing.
    #[test]
    fn a_plaintext_connection_counts_as_ended_not_as_a_missing_handshake() {
        assert!(ended(1, 1, 2));
        assert!(ended(0, 1, 1));
        assert!(ended(2, 0, 2));
        assert!(!ended(1, 0, 2));
        assert!(!ended(0, 0, 1));
    }
}
