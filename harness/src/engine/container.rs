//! The container engine: the pinned Valkey image through testcontainers, removed on drop and on Ctrl-C.

use std::process::{Command, Stdio};
use std::time::Duration;

use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::SyncRunner;
use testcontainers::{Container, GenericImage, ImageExt};

use crate::engine::acl::Users;
use crate::engine::cleanup::{Guard, owner_labels, register_container};
use crate::engine::server_flags;
use crate::error::HarnessError;

/// A running container.
pub struct Running {
    pub host: String,
    pub port: u16,
    container: Option<Container<GenericImage>>,
    _guard: Guard,
}

/// True when a Docker daemon answers and holds `image` (no registry is ever asked).
pub fn available(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts `image` with its users and no persistence.
pub fn start(image: &str, users: &Users) -> Result<Running, HarnessError> {
    start_with(image, users, None)
}

/// [`start`] listening on TLS only (SPEC §10): the run's certificate directory mounted
/// read-only at `/tls`, the TLS port 6379.
pub fn start_tls(
    image: &str,
    users: &Users,
    tls: &crate::tls::RunTls,
) -> Result<Running, HarnessError> {
    start_with(image, users, Some(tls))
}

fn start_with(
    image: &str,
    users: &Users,
    tls: Option<&crate::tls::RunTls>,
) -> Result<Running, HarnessError> {
    if !available(image) {
        return Err(HarnessError::Engine(format!(
            "image {image} is not present (or Docker does not answer): run ci/provision"
        )));
    }
    let (name, tag) = image.rsplit_once(':').unwrap_or((image, "latest"));
    let mut cmd = server_flags(users);
    let mut mount = None;
    if let Some(t) = tls {
        let dir = t.shared_dir()?;
        cmd.extend(t.server_flags_in(6379, std::path::Path::new("/tls")));
        mount = Some(testcontainers::core::Mount::bind_mount(
            dir.display().to_string(),
            "/tls",
        ));
    }
    let mut request = GenericImage::new(name, tag)
        .with_exposed_port(6379.tcp())
        .with_wait_for(WaitFor::message_on_stdout("Ready to accept connections"))
        .with_cmd(cmd)
        .with_label("org.echomq.harness", "engine")
        .with_startup_timeout(Duration::from_secs(60));
    if let Some(m) = mount {
        request = request.with_mount(m);
    }
    // Its owner, so a later run can remove it if this harness is SIGKILLed.
    for (key, value) in owner_labels() {
        request = request.with_label(key, value);
    }
    let c = request
        .start()
        .map_err(|e| HarnessError::Engine(format!("container {image}: {e}")))?;
    let guard = register_container(c.id());
    let port = c
        .get_host_port_ipv4(6379.tcp())
        .map_err(|e| HarnessError::Engine(format!("container port: {e}")))?;
    Ok(Running {
        host: "127.0.0.1".into(),
        port,
        container: Some(c),
        _guard: guard,
    })
}

impl Running {
    /// Removes the container.
    pub fn stop(&mut self) {
        if let Some(c) = self.container.take() {
            let _ = c.rm();
        }
    }
}
