//! The cluster engine: a real Valkey Cluster of six `valkey-server` nodes on loopback (three
//! primaries, three replicas), created with `valkey-cli --cluster create`, the same users on every
//! node (`crate::engine::acl`: a replica authenticates to its primary as the admin user). Each node is a binary engine with its own owner file, so
//! the stale-engine sweep removes the nodes of a harness that is gone, as it does single servers.
//!
//! **Every client connection goes through the harness's fault proxy.** Each node has a
//! [`Proxy`] in front of it and announces the proxy's port to clients
//! (`cluster-announce-client-port`): `CLUSTER SLOTS`, `CLUSTER NODES`, `MOVED` and `ASK` name the
//! proxy, so a cluster client reaches every node through it and G8 can fault any node's calls
//! (SPEC §5). Only clients see the proxy: replication and the cluster bus use the node's own port
//! (`cluster-announce-port` stays unset), so the proxy never carries a replication stream, which
//! is not one reply per command. The harness's own connections (admin, `MONITOR`, `CLIENT KILL`,
//! the failover) go to the real port: [`Node`] holds every address a node has.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::engine::acl::Users;
use crate::engine::admin::{Probe, parse_info};
use crate::engine::binary::{self, free_port};
pub use crate::engine::proxied::Node;
use crate::engine::topology::view::Role;
use crate::error::HarnessError;

/// Primaries and replicas the harness boots.
pub const PRIMARIES: usize = 3;
pub const REPLICAS_PER_PRIMARY: usize = 1;
/// Every slot of a cluster.
pub const SLOTS: u32 = 16_384;

/// How long creation may take before the boot is an error.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// A running cluster; every node is killed on drop.
pub struct Running {
    /// Every node, in creation order (its [`crate::engine::topology::NodeId`]): the first
    /// [`PRIMARIES`] were created as primaries.
    pub nodes: Vec<Node>,
    /// A TLS cluster's certificates (SPEC §10).
    pub tls: Option<std::sync::Arc<crate::tls::RunTls>>,
}

/// The flags that make a TLS node gossip, replicate and announce itself over TLS, by the host
/// name its certificate gives (SPEC §10, R10.4): `CLUSTER SLOTS` then names `localhost`, so a
/// client that connects by address cannot verify the name.
fn tls_node_flags() -> Vec<String> {
    [
        "--tls-cluster",
        "yes",
        "--tls-replication",
        "yes",
        "--cluster-announce-hostname",
        crate::tls::TLS_HOST,
        "--cluster-preferred-endpoint-type",
        "hostname",
    ]
    .map(String::from)
    .to_vec()
}

/// The setting that names the port a node announces to clients: a TLS node announces its TLS
/// port (`port 0`: it has no other).
pub fn announce_setting(tls: bool) -> &'static str {
    if tls {
        "cluster-announce-client-tls-port"
    } else {
        "cluster-announce-client-port"
    }
}

/// The node timeout: how long a node may not answer before its peers flag it failing. A gate's
/// only failover is G8's `CLUSTER FAILOVER`, which does not wait for it; 15 s keeps six nodes
/// starved by a CPU-bound neighbour on two cores from being flagged (a 5 s timeout was not enough
/// under load).
pub const NODE_TIMEOUT_MS: u32 = 15_000;

/// How many databases each node serves (`cluster-databases`, Valkey 9.0+; SPEC R8.5).
pub const DATABASES: u32 = 16;

/// The database every run on a cluster works in, and the only one the connector's user may use
/// (`db=`, Valkey 9.1+): not 0, so a connection that lost its `SELECT` (one opened to follow a
/// redirect, a replacement) meets `NOPERM` on its first keyed command instead of working
/// unseen in database 0 (SPEC R8.5).
pub const DB: u32 = 9;

/// The flags that make a server a cluster node: cluster mode, its bus port, the user and password
/// it gives its primary, and settings under which the cluster changes only when the harness asks
/// (a verdict must not depend on how busy the machine is):
/// - `cluster-replica-no-failover yes`: a replica never promotes itself; the manual
///   `CLUSTER FAILOVER` of G8 still works (Valkey's `clusterHandleReplicaFailover` exempts it);
/// - `cluster-require-full-coverage no`: a primary flagged failing by a slow peer keeps its
///   slots served instead of taking the whole cluster down;
/// - [`NODE_TIMEOUT_MS`];
/// - [`DATABASES`] databases.
fn node_flags(users: &Users, dir_hint: &str, bus: u16) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        &bus.to_string(),
        "--cluster-config-file",
        &format!("nodes-{dir_hint}.conf"),
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        "--cluster-replica-no-failover",
        "yes",
        "--cluster-require-full-coverage",
        "no",
        "--cluster-databases",
        &DATABASES.to_string(),
    ]
    .map(String::from)
    .to_vec();
    flags.extend(users.replication_flags());
    flags
}

/// `valkey-cli` beside `valkey-server`, else on PATH.
pub fn locate_cli(server: &Path) -> Result<PathBuf, HarnessError> {
    let beside = server.with_file_name("valkey-cli");
    if beside.is_file() {
        return Ok(beside);
    }
    let on_path = crate::settings::on_path("valkey-cli")
        .into_iter()
        .find(|p| p.is_file());
    on_path.ok_or_else(|| {
        HarnessError::Engine(format!(
            "no valkey-cli beside {} or on PATH: the cluster is created with it",
            server.display()
        ))
    })
}

/// Boots six nodes, creates the cluster and waits until every node reports `cluster_state:ok`
/// with all [`SLOTS`] slots assigned and every replica in sync with its primary. With `tls`, every
/// node listens, gossips and replicates over TLS only, with the run's certificates (SPEC §10).
pub fn start(
    server: &Path,
    users: &Users,
    tls: Option<std::sync::Arc<crate::tls::RunTls>>,
) -> Result<Running, HarnessError> {
    let cli = locate_cli(server)?;
    let mut running = Running {
        nodes: Vec::new(),
        tls,
    };
    for i in 0..PRIMARIES * (1 + REPLICAS_PER_PRIMARY) {
        let server = start_node(server, users, i, running.tls.as_deref())?;
        let mut node = Node::behind_proxy(server, running.tls.as_ref())?;
        // Set before the nodes meet, so the first gossip already carries the proxy's port.
        let setting = announce_setting(running.tls.is_some());
        let port = node.announced().to_string();
        node.announce = vec![format!("--{setting}"), port.clone()];
        announce(users, &node, setting, &port)?;
        running.nodes.push(node);
    }
    create(&cli, users, &running)?;
    wait_ready(users, &running)?;
    Ok(running)
}

/// `CONFIG SET setting port` on `node`, asked again while the node does not answer it (a node
/// just started, or a TLS node's plaintext back, can be slow to on a loaded machine: CI met it
/// once); an engine without the setting is an error at once.
fn announce(users: &Users, node: &Node, setting: &str, port: &str) -> Result<(), HarnessError> {
    let set = ["CONFIG", "SET", setting, port];
    let mut probe = probe(users, node.admin_port());
    let mut last = String::new();
    let mut unknown = false;
    let deadline = Instant::now() + READY_WITHIN;
    while !unknown && Instant::now() < deadline {
        match probe.query(&set) {
            Ok(r) if r == "OK" => return Ok(()),
            Ok(r) | Err(r) => {
                unknown = r.contains("Unknown option");
                last = r.trim().to_string();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(HarnessError::Engine(format!(
        "the node at port {} refused {setting} (Valkey 9.1 has it; 8.1 does not): {last}",
        node.port()
    )))
}

/// Node `i`, on fresh ports: a new bus port on each try, as one taken meanwhile is a port clash,
/// tried again.
fn start_node(
    server: &Path,
    users: &Users,
    i: usize,
    tls: Option<&crate::tls::RunTls>,
) -> Result<binary::Running, HarnessError> {
    let flags = || {
        let mut f = node_flags(users, &i.to_string(), free_port()?);
        if tls.is_some() {
            f.extend(tls_node_flags());
        }
        Ok(f)
    };
    binary::start_picking(server, users, &flags, tls)
}

/// `valkey-cli --cluster create` on the nodes' own ports (over TLS on a TLS cluster: the nodes
/// meet at the addresses it gives them).
fn create(cli: &Path, users: &Users, running: &Running) -> Result<(), HarnessError> {
    let addrs: Vec<String> = running
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let mut cmd = Command::new(cli);
    if let Some(run) = &running.tls {
        cmd.args([
            "--tls",
            "--cacert",
            &run.ca_file(),
            "--sni",
            crate::tls::TLS_HOST,
        ]);
    }
    let out = cmd
        .args(users.cli_flags())
        .args(["--cluster", "create"])
        .args(&addrs)
        .args([
            "--cluster-replicas",
            &REPLICAS_PER_PRIMARY.to_string(),
            "--cluster-yes",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| HarnessError::io(format!("run {}", cli.display()), e))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(HarnessError::Engine(format!(
            "valkey-cli --cluster create failed ({}): {last}",
            out.status
        )));
    }
    Ok(())
}

/// How long a boot query may take: a node that does not answer is asked again, within
/// [`READY_WITHIN`].
const PROBE_WITHIN: Duration = Duration::from_secs(5);

/// A node's admin connection for the boot's own queries. A connection, not a `valkey-cli`
/// process per query: a boot's polling was 138 of them, about a CPU second per cluster on two
/// cores (counted with `strace -e execve`).
fn probe(users: &Users, admin_port: u16) -> Probe {
    let url = crate::engine::acl::url_of("127.0.0.1", admin_port, &users.admin(), 0);
    Probe::new(url, PROBE_WITHIN)
}

/// Field `key` of `CLUSTER INFO` text (`cluster_state` → `ok`).
pub fn info_field<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// True when `CLUSTER INFO` text says the cluster serves every slot.
pub fn info_ready(info: &str) -> bool {
    let field = |k: &str| info_field(info, k);
    field("cluster_state") == Some("ok")
        && field("cluster_slots_ok") == Some(&SLOTS.to_string())
        && field("cluster_known_nodes")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n == PRIMARIES * (1 + REPLICAS_PER_PRIMARY))
}

/// True when `CLUSTER NODES` text (one node's view) shows every primary and every replica.
pub fn nodes_ready(nodes: &str) -> bool {
    let views = crate::engine::topology::view::parse_nodes(nodes);
    let count = |role: Role| views.values().filter(|v| v.role == role).count();
    count(Role::Primary) == PRIMARIES && count(Role::Replica) == PRIMARIES * REPLICAS_PER_PRIMARY
}

/// True when every node in `CLUSTER NODES` text (one node's view) is announced at one of
/// `proxy_ports`: a client that reads this view reaches every node through its proxy.
pub fn announced(nodes: &str, proxy_ports: &[u16]) -> bool {
    let views = crate::engine::topology::view::parse_nodes(nodes);
    !views.is_empty()
        && (views.values()).all(|v| v.port().is_some_and(|p| proxy_ports.contains(&p)))
}

fn wait_ready(users: &Users, running: &Running) -> Result<(), HarnessError> {
    let deadline = Instant::now() + READY_WITHIN;
    let proxy_ports: Vec<u16> = running.nodes.iter().map(Node::announced).collect();
    let mut probes: Vec<Probe> = (running.nodes.iter())
        .map(|n| probe(users, n.admin_port()))
        .collect();
    loop {
        let ready = probes.iter_mut().all(|p| {
            let mut ask = |args: &[&str]| p.query(args).unwrap_or_default();
            let info = ask(&["CLUSTER", "INFO"]);
            let repl = parse_info(&ask(&["INFO", "replication"]));
            let nodes = ask(&["CLUSTER", "NODES"]);
            info_ready(&info)
                && (Role::from_info(&repl) == Some(Role::Primary)
                    || repl.get("master_link_status").is_some_and(|s| s == "up"))
                && nodes_ready(&nodes)
                && announced(&nodes, &proxy_ports)
        });
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(HarnessError::Engine(format!(
                "the cluster did not reach cluster_state:ok with {SLOTS} slots and synced replicas within {} s",
                READY_WITHIN.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Running {
    /// Kills every node.
    pub fn stop(&mut self) {
        for n in &mut self.nodes {
            n.server.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::info_ready;
    use crate::engine::topology::view::Role;

    #[test]
    fn ready_means_ok_every_slot_and_six_nodes() {
        let ok = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_known_nodes:6\r\n";
        assert!(info_ready(ok));
        assert!(!info_ready(&ok.replace("state:ok", "state:fail")));
        assert!(!info_ready(&ok.replace("slots_ok:16384", "slots_ok:16000")));
        assert!(!info_ready(&ok.replace("nodes:6", "nodes:4")));
        assert!(!info_ready(""));
    }

    #[test]
    fn nodes_ready_needs_every_primary_and_replica_in_view() {
        let line =
            |id: &str, flags: &str| format!("{id} 127.0.0.1:1@2 {flags} - 0 0 1 connected\n");
        let (primary, replica) = (Role::Primary.word(), Role::Replica.word());
        let mut all = String::new();
        for i in 0..3 {
            let flags = if i == 0 {
                format!("myself,{primary}")
            } else {
                primary.to_string()
            };
            all += &line(&format!("m{i}"), &flags);
            all += &line(&format!("r{i}"), replica);
        }
        assert!(super::nodes_ready(&all));
        let fewer: String = all.lines().take(5).map(|l| format!("{l}\n")).collect();
        assert!(!super::nodes_ready(&fewer));
    }

    #[test]
    fn announced_needs_every_node_at_a_proxy_port() {
        let (primary, replica) = (Role::Primary.word(), Role::Replica.word());
        let view = format!(
            "a 127.0.0.1:7000@17000 myself,{primary} - 0 0 1 connected 0-5460\n\
             b 127.0.0.1:7001@17001 {replica} a 0 0 1 connected\n"
        );
        let view = view.as_str();
        assert!(super::announced(view, &[7000, 7001]));
        assert!(!super::announced(view, &[7000]));
        assert!(!super::announced("", &[7000]));
    }
}
