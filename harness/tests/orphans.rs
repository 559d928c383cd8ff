//! No engine outlives a killed harness: `emq-gate run` is SIGKILLed (no handler runs) while its
//! engine is up; the engine is still there, and the next engine start removes it and says so.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use emq::engine::cleanup::{ServerRecord, engines_dir, start_time};
use emq::engine::{EngineChoice, EngineOptions, container};

/// `emq-gate run` on `engine` with work enough to keep it busy until it is killed.
fn busy_harness(engine: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_emq-gate"))
        .args(["run", "-q", "--engine", engine, "--gates", "G7"])
        .args(["--histories", "100000000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start emq-gate")
}

fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The sweep removes every engine of a dead harness, whoever starts next: the tests that kill a
/// harness take turns, so one's sweep does not take another's evidence.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The owner files of the binary engines (and cluster nodes) that harness `owner` started.
fn records_of(owner: u32) -> Vec<(std::path::PathBuf, ServerRecord)> {
    let Ok(dir) = std::fs::read_dir(engines_dir()) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let rec: ServerRecord = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            (rec.owner.pid == owner).then(|| (e.path(), rec))
        })
        .collect()
}

fn sigkill(mut harness: Child) {
    harness.kill().unwrap(); // SIGKILL
    harness.wait().unwrap();
}

#[test]
fn a_sigkilled_harness_leaves_no_binary_engine() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let harness = busy_harness("binary");
    let owner = harness.id();
    let (path, rec) = wait_for("the harness's engine", Duration::from_secs(60), || {
        records_of(owner).into_iter().next()
    });
    sigkill(harness);
    assert_eq!(
        start_time(rec.server_pid),
        Some(rec.server_start),
        "the killed harness's valkey-server still runs"
    );
    assert!(rec.dir.is_dir());

    let engine = common::binary_engine();
    let swept = engine.swept.clone().unwrap_or_default();
    eprintln!("the next engine start said: {swept}");
    let named = format!(
        "valkey-server pid {} on port {} (owner pid {owner})",
        rec.server_pid, rec.port
    );
    gone(&path, &rec, swept.contains(&named));
    drop(engine);
}

/// The engine of `rec` no longer runs and its files are removed, within a bound. The sweep is
/// every engine start's, in any process: ci/test runs test binaries side by side, so another
/// binary's start may sweep a node first (CI met it: this start named five nodes of six), and
/// then it may still be finishing (its kill waits up to 2 s for the process to end).
fn gone(path: &std::path::Path, rec: &ServerRecord, named_here: bool) {
    if !named_here {
        eprintln!("port {}: swept by another engine start", rec.port);
    }
    wait_for(
        &format!("the sweep of the engine on port {}", rec.port),
        Duration::from_secs(10),
        || {
            (start_time(rec.server_pid).is_none() && !path.exists() && !rec.dir.exists())
                .then_some(())
        },
    );
}

/// The same for a cluster: six nodes, each with its owner file, all removed by the next start.
#[test]
fn a_sigkilled_harness_leaves_no_cluster_node() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let harness = busy_harness("cluster");
    let owner = harness.id();
    // The gates start once the cluster is ready: wait for six owner files, then a little more.
    let records = wait_for("the harness's six nodes", Duration::from_secs(90), || {
        let recs = records_of(owner);
        (recs.len() == 6).then_some(recs)
    });
    sigkill(harness);
    for (_, rec) in &records {
        assert_eq!(
            start_time(rec.server_pid),
            Some(rec.server_start),
            "a node of the killed harness's cluster is gone before the sweep"
        );
    }
    let engine = common::binary_engine();
    let swept = engine.swept.clone().unwrap_or_default();
    eprintln!("the next engine start said: {swept}");
    for (path, rec) in &records {
        let named = format!("valkey-server pid {} on port {}", rec.server_pid, rec.port);
        gone(path, rec, swept.contains(&named));
    }
    drop(engine);
}

#[test]
fn a_sigkilled_harness_leaves_no_container() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let image = EngineOptions::default().image;
    if !container::available(&image) {
        eprintln!("skipped: Docker or the image {image} is not available");
        return;
    }
    let harness = busy_harness("container");
    let owner = harness.id();
    let label = format!("label=org.echomq.owner-pid={owner}");
    let ps = || {
        let out = Command::new("docker")
            .args(["ps", "-a", "-q", "--no-trunc", "--filter", &label])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let id = wait_for("the harness's container", Duration::from_secs(90), || {
        Some(ps()).filter(|s| !s.is_empty())
    });
    // Its engine answers before the gates start; give it that moment, then kill.
    std::thread::sleep(Duration::from_secs(2));
    sigkill(harness);
    assert_eq!(ps(), id, "the killed harness's container is still there");

    let engine = common::engine(EngineChoice::Container);
    let swept = engine.swept.clone().unwrap_or_default();
    eprintln!("the next engine start said: {swept}");
    assert!(
        swept.contains(&format!("(owner pid {owner})")) && swept.contains("container "),
        "{swept}"
    );
    assert_eq!(ps(), "", "the container is gone");
    drop(engine);
}
