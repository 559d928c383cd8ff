//! The run's TLS material (SPEC §10): a CA made per run, and certificates it signs, each naming
//! one host by a DNS name and no address, written to the run's temp dir for the engine (its
//! `--tls-cert-file`), the fault proxy's front, and the connector (`connect`'s `ca_file`).
//!
//! Made in-process with rcgen: the harness never shells out to `openssl`, and nothing outlives
//! the run (the files go with their [`tempfile::TempDir`]).

pub mod relay;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

use crate::error::HarnessError;

/// The host every certificate of a TLS engine names, and the host of its urls: a DNS name, so a
/// client that connects by address cannot verify it (SPEC R10.4).
pub const TLS_HOST: &str = "localhost";

/// The host a certificate for "another name" names (SPEC R10.4's check): reserved, never a host.
pub const OTHER_HOST: &str = "other.invalid";

/// A certificate and its key, as PEM and as files.
#[derive(Debug, Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// A CA of the run: its certificate (PEM and file) and what it signs.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub cert_pem: String,
    pub cert_file: PathBuf,
    dir: PathBuf,
    label: String,
}

fn tls_err(what: &str, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Engine(format!("tls: {what}: {e}"))
}

fn write(path: &Path, text: &str) -> Result<(), HarnessError> {
    std::fs::write(path, text).map_err(|e| HarnessError::io(format!("write {}", path.display()), e))
}

impl Ca {
    /// A new CA named `label`, its files under `dir`.
    pub fn new(dir: &Path, label: &str) -> Result<Self, HarnessError> {
        let key = KeyPair::generate().map_err(|e| tls_err("a CA key", e))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| tls_err("CA parameters", e))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("emq-gate {label} CA"));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(|e| tls_err("the CA", e))?;
        let cert_pem = issuer.pem();
        let cert_file = dir.join(format!("{label}-ca.pem"));
        write(&cert_file, &cert_pem)?;
        Ok(Self {
            issuer,
            cert_pem,
            cert_file,
            dir: dir.to_path_buf(),
            label: label.to_string(),
        })
    }

    /// A server certificate for `host` only (a DNS name in its subjectAltName, no address),
    /// written as `<label>-<stem>.{crt,key}`; `expired` makes one whose validity ended in 2000.
    pub fn leaf(&self, host: &str, stem: &str, expired: bool) -> Result<Leaf, HarnessError> {
        let key = KeyPair::generate().map_err(|e| tls_err("a server key", e))?;
        let mut params = CertificateParams::new(vec![host.to_string()])
            .map_err(|e| tls_err("server parameters", e))?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        if expired {
            params.not_before = rcgen::date_time_ymd(1999, 1, 1);
            params.not_after = rcgen::date_time_ymd(2000, 1, 1);
        }
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| tls_err("a server certificate", e))?;
        let base = format!("{}-{stem}", self.label);
        let leaf = Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_file: self.dir.join(format!("{base}.crt")),
            key_file: self.dir.join(format!("{base}.key")),
        };
        write(&leaf.cert_file, &leaf.cert_pem)?;
        write(&leaf.key_file, &leaf.key_pem)?;
        Ok(leaf)
    }
}

/// A connection that began in plaintext at a TLS front (SPEC R10.2): the front's port (what
/// the connector's url or the slot map named) and the first bytes it sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plaintext {
    pub port: u16,
    pub bytes: Vec<u8>,
}

impl Plaintext {
    /// `port 41234: "*2\r\n$5\r\nHELLO…"`, for evidence; an `AUTH`'s password withheld (the
    /// line is printed and committed: it quotes what the connector sent, never its secret).
    pub fn describe(&self) -> String {
        format!(
            "port {}: {:?}",
            self.port,
            withhold_password(&String::from_utf8_lossy(&self.bytes))
        )
    }
}

/// `text` (the first bytes of a RESP command) with the password of an `AUTH` (the command, or
/// `HELLO`'s argument) replaced by `<password withheld>`: after `AUTH`, the username when two
/// words follow (`*3` `AUTH user pass`, `HELLO 3 AUTH user pass`), then the password.
fn withhold_password(text: &str) -> String {
    let mut parts: Vec<String> = text.split("\r\n").map(str::to_string).collect();
    // Data words sit at odd indexes after the `*N` header: `*3`, `$4`, `AUTH`, `$3`, `emq`, ...
    let words: Vec<usize> = (2..parts.len()).step_by(2).collect();
    let Some(at) = words
        .iter()
        .position(|&i| parts[i].eq_ignore_ascii_case("auth"))
    else {
        return text.to_string();
    };
    let one_arg = at == 0 && parts[0] == "*2";
    let password = if one_arg { at + 1 } else { at + 2 };
    if let Some(&i) = words.get(password) {
        parts[i] = "<password withheld>".into();
        parts.truncate(i + 1);
    }
    parts.join("\r\n")
}

/// A TLS engine's material: the run's CA (the one a connector is given), the engine's
/// certificate, and what the front presents when a check asks it to lie (SPEC R10.3, R10.4).
pub struct RunTls {
    /// Removed with the run.
    _dir: tempfile::TempDir,
    pub ca: Ca,
    /// The engine's and the front's certificate: the run's CA, for [`TLS_HOST`].
    pub server: Leaf,
    /// A certificate for [`TLS_HOST`] from a CA no connector is given.
    pub other_ca: Leaf,
    /// A certificate of the run's CA for [`OTHER_HOST`].
    pub other_name: Leaf,
    /// A certificate of the run's CA for [`TLS_HOST`] that expired in 2000.
    pub expired: Leaf,
    /// Every connection any front of this engine saw begin in plaintext, until taken.
    plaintext: std::sync::Mutex<Vec<Plaintext>>,
}

impl RunTls {
    /// Makes the run's CA and every certificate, in a temp dir of their own.
    pub fn new() -> Result<Arc<Self>, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix("emq-tls-")
            .tempdir()
            .map_err(|e| HarnessError::io("temp dir for the run's certificates", e))?;
        let ca = Ca::new(dir.path(), "run")?;
        let server = ca.leaf(TLS_HOST, "server", false)?;
        let other_name = ca.leaf(OTHER_HOST, "other-name", false)?;
        let expired = ca.leaf(TLS_HOST, "expired", true)?;
        let other = Ca::new(dir.path(), "other")?;
        let other_ca = other.leaf(TLS_HOST, "server", false)?;
        Ok(Arc::new(Self {
            _dir: dir,
            ca,
            server,
            other_ca,
            other_name,
            expired,
            plaintext: std::sync::Mutex::default(),
        }))
    }

    /// A front saw a connection begin in plaintext.
    pub fn record_plaintext(&self, p: Plaintext) {
        self.plaintext
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p);
    }

    /// The plaintext connections seen since the last call.
    pub fn take_plaintext(&self) -> Vec<Plaintext> {
        std::mem::take(&mut *self.plaintext.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The file a connector is given as `ca_file`.
    pub fn ca_file(&self) -> String {
        self.ca.cert_file.display().to_string()
    }

    /// The server flags of a TLS engine listening on `port`: TLS only (`port 0`), the run's
    /// certificate, no client certificate asked for.
    pub fn server_flags(&self, port: u16) -> Vec<String> {
        self.server_flags_in(port, self._dir.path())
    }

    /// [`RunTls::server_flags`] with the certificate files named under `dir` (where a
    /// container sees the run's directory).
    pub fn server_flags_in(&self, port: u16, dir: &Path) -> Vec<String> {
        let name = |p: &Path| {
            dir.join(p.file_name().unwrap_or_default())
                .display()
                .to_string()
        };
        [
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--tls-cert-file",
            &name(&self.server.cert_file),
            "--tls-key-file",
            &name(&self.server.key_file),
            "--tls-ca-cert-file",
            &name(&self.ca.cert_file),
            "--tls-auth-clients",
            "no",
        ]
        .map(String::from)
        .to_vec()
    }

    /// The directory of the run's certificates, readable by the container's unprivileged user:
    /// its keys are the run's own, made for this run and gone with it.
    pub fn shared_dir(&self) -> Result<&Path, HarnessError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self._dir.path();
        let set = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
                .map_err(|e| HarnessError::io(format!("chmod {}", p.display()), e))
        };
        set(dir, 0o755)?;
        for entry in std::fs::read_dir(dir)
            .map_err(|e| HarnessError::io("read the run's certificates", e))?
        {
            let path = entry
                .map_err(|e| HarnessError::io("read the run's certificates", e))?
                .path();
            set(&path, 0o644)?;
        }
        Ok(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plaintext_auth_is_quoted_without_its_password() {
        let auth = Plaintext {
            port: 1,
            bytes: b"*3\r\n$4\r\nAUTH\r\n$3\r\nemq\r\n$32\r\n3daa550fed95c5479ea7".to_vec(),
        };
        let line = auth.describe();
        assert!(!line.contains("3daa55"), "{line}");
        assert!(
            line.contains("AUTH\\r\\n$3\\r\\nemq\\r\\n$32\\r\\n<password withheld>"),
            "{line}"
        );
        assert_eq!(
            withhold_password("*2\r\n$4\r\nauth\r\n$6\r\nsecret\r\n"),
            "*2\r\n$4\r\nauth\r\n$6\r\n<password withheld>"
        );
        assert_eq!(
            withhold_password(
                "*6\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n"
            ),
            "*6\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\n<password withheld>"
        );
        let ping = "*1\r\n$4\r\nPING\r\n";
        assert_eq!(withhold_password(ping), ping);
    }

    #[test]
    fn the_run_makes_a_ca_and_certificates_that_name_one_host_and_no_address() {
        let t = RunTls::new().unwrap();
        for leaf in [&t.server, &t.other_ca, &t.other_name, &t.expired] {
            assert!(leaf.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
            assert!(leaf.key_pem.contains("PRIVATE KEY"));
            assert!(leaf.cert_file.is_file() && leaf.key_file.is_file());
        }
        assert!(
            std::fs::read_to_string(t.ca_file())
                .unwrap()
                .contains("BEGIN CERTIFICATE")
        );
        let flags = t.server_flags(7000);
        assert_eq!(flags[..4], ["--port", "0", "--tls-port", "7000"]);
    }
}
