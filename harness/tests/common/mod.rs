//! What the integration tests share: engines, the bundle, the provisioned Python connector, and
//! the connector lifecycle. Each test binary uses a part of it.
#![allow(dead_code)]

pub mod judge;
pub mod lifecycle;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use emq::connector::ConnectorFactory;
use emq::engine::{Engine, EngineChoice};
use emq::gates::{ALL, GateContext, GateId, GateOutcome, run_gate};
use emq::protocol::bundle::Bundle;

/// An engine of `choice`, configured as the user configured it (`EMQ_VALKEY_SERVER`,
/// `EMQ_VALKEY_IMAGE`, ...; see the README's table).
pub fn engine(choice: EngineChoice) -> Engine {
    let opts = emq::engine::EngineOptions {
        choice,
        ..emq::cmd::cli::engine_options_from_env().expect("the EMQ_* environment")
    };
    Engine::start(&opts).unwrap_or_else(|e| panic!("{choice:?} engine: {e} (run ci/provision)"))
}

/// A binary engine of its own: tests that use `SCRIPT FLUSH`, `CONFIG RESETSTAT` or `MONITOR`
/// boot one each, so they run in parallel without sharing those.
pub fn binary_engine() -> Engine {
    engine(EngineChoice::Binary)
}

/// A Valkey Cluster of its own (three primaries, three replicas; SPEC §8).
pub fn cluster_engine() -> Engine {
    engine(EngineChoice::Cluster)
}

/// A single TLS engine of its own (SPEC §10): the `valkey-9.1-tls` build, TLS only.
pub fn tls_engine() -> Engine {
    let name = emq::engine::named::EngineName::resolve("valkey-9.1-tls")
        .unwrap_or_else(|e| panic!("{e} (run ci/provision --engines valkey-9.1-tls)"));
    let opts = emq::cmd::matrix::engine_options(&name, EngineChoice::Binary);
    Engine::start(&opts).unwrap_or_else(|e| panic!("TLS engine: {e} (run ci/provision)"))
}

/// A single engine of its own of the matrix's engine `name` (`valkey-8.1`, `redis-7.0`).
pub fn named_engine(name: &str) -> Engine {
    let named = emq::engine::named::EngineName::resolve(name)
        .unwrap_or_else(|e| panic!("{e} (run ci/provision --engines all)"));
    let opts = emq::cmd::matrix::engine_options(&named, EngineChoice::Binary);
    Engine::start(&opts).unwrap_or_else(|e| panic!("{name}: {e} (run ci/provision)"))
}

/// A Valkey Cluster of its own over TLS (SPEC §10 on §8): the `valkey-9.1-tls` build.
pub fn tls_cluster_engine() -> Engine {
    let name = emq::engine::named::EngineName::resolve("valkey-9.1-tls-cluster")
        .unwrap_or_else(|e| panic!("{e} (run ci/provision --engines valkey-9.1-tls)"));
    let opts = emq::cmd::matrix::engine_options(&name, EngineChoice::Cluster);
    Engine::start(&opts).unwrap_or_else(|e| panic!("TLS cluster: {e} (run ci/provision)"))
}

/// The built `emq-gate` with `args` (and `env` set, `EMQ_ENGINE_URL` removed): its exit code and
/// everything it printed, stdout then stderr.
pub fn gate_with(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_emq-gate"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("EMQ_ENGINE_URL")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// [`gate_with`] in the test's own environment.
pub fn gate(args: &[&str]) -> (Option<i32>, String) {
    gate_with(args, &[])
}

pub fn bundle() -> Arc<Bundle> {
    Arc::new(Bundle::load_default().expect("the repository's bundle"))
}

fn no_progress(_: &str) {}

/// The gate context of a test: seed 42, 10 histories and a batch of 20 000 (small enough to keep
/// the tests quick; a certifying run uses ≥ 100 000), no progress lines. A test that needs other
/// numbers says so with `GateContext { seed: 7, ..common::gate_context(..) }`.
pub fn gate_context<'a>(
    engine: &'a Engine,
    bundle: &'a Arc<Bundle>,
    factory: &'a dyn ConnectorFactory,
) -> GateContext<'a> {
    GateContext {
        engine,
        bundle,
        cases: emq::cmd::sources::Dirs::from_env().cases,
        factory,
        seed: 42,
        histories: 10,
        batch: 20_000,
        progress: &no_progress,
    }
}

/// Runs gate `id` in `ctx`.
pub fn run(ctx: &GateContext<'_>, id: GateId) -> GateOutcome {
    let gate = ALL
        .iter()
        .find(|g| g.id == id)
        .expect("every id has a gate");
    run_gate(gate, ctx)
}

/// The file the variable `var` names, as `ci/provision` writes it (a connector, a server). Outside
/// CI a test that needs it is skipped with a line saying so; in CI (`CI` set) its absence is a
/// failure, so no test passes there by skipping.
pub fn provisioned(var: &str) -> Option<PathBuf> {
    let found = emq::settings::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if found.is_none() {
        assert!(
            !emq::settings::in_ci(),
            "CI is set but {var} names no file: run ci/provision"
        );
        eprintln!("skipped: {var} names no file (run ci/provision, or set it)");
    }
    found
}

/// The Python connector `ci/provision` installed (`EMQ_PYTHON_CONNECTOR`), as [`provisioned`].
pub fn python_connector() -> Option<PathBuf> {
    provisioned("EMQ_PYTHON_CONNECTOR")
}

/// `emq-gate run --gates G1` of the Python fixture `fixture` (a connector that leaves something
/// out, forwarding the rest to the Python connector at `python`) on engine `engine`, as a binary:
/// its exit code and everything it printed.
pub fn g1_of_fixture(python: &Path, fixture: &str, engine: &str) -> (Option<i32>, String) {
    g1_of_fixture_with(python, fixture, engine, &[])
}

/// [`g1_of_fixture`] with more environment for the fixture.
pub fn g1_of_fixture_with(
    python: &Path,
    fixture: &str,
    engine: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> (Option<i32>, String) {
    let fixture = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    gate_with(
        &[
            "-q",
            "run",
            "--engine-name",
            engine,
            "--engine",
            "binary",
            "--gates",
            "G1",
            // A busy machine starts Python slowly; the point here is not its speed.
            "--timeout",
            "60",
            "--",
            "python3",
            &fixture,
        ],
        &[&[("EMQ_PYTHON_CONNECTOR", python.as_os_str())], env].concat(),
    )
}

/// Pids of the processes whose environment holds `var=marker`: a test marks what it starts, and
/// finds what is left running.
pub fn marked(var: &str, marker: &str) -> Vec<u32> {
    let needle = format!("{var}={marker}");
    processes(|dir| {
        std::fs::read(dir.join("environ"))
            .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
    })
}

/// Pids of the running processes whose `/proc/<pid>` folder `pick` picks.
pub fn processes(pick: impl Fn(&std::path::Path) -> bool) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if pick(&entry.path()) {
            found.push(pid);
        }
    }
    found
}

/// How many times slower than an idle machine this one runs now, from 1 to 10: the wall time of
/// 100 ms of this thread's CPU work over that CPU time (a thread that shares a core with k other
/// busy ones gets about 1/(k+1) of it). A test's "judged within" bound is a promise about the
/// harness on a machine of its own; on a shared one it is multiplied by this, so that other
/// processes stretch it instead of failing it, and a hang (which no factor of 10 covers) is still
/// caught.
pub fn slowness() -> f64 {
    use rustix::time::{ClockId, clock_gettime};
    let cpu = || {
        let t = clock_gettime(ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let (w0, c0) = (Instant::now(), cpu());
    let mut x = 1u64;
    while cpu() - c0 < Duration::from_millis(100) {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
    (w0.elapsed().as_secs_f64() / (cpu() - c0).as_secs_f64()).clamp(1.0, 10.0)
}

/// `bound` scaled by [`slowness`] measured now, said on stderr.
pub fn scaled_bound(what: &str, bound: Duration) -> Duration {
    let s = slowness();
    let b = bound.mul_f64(s);
    eprintln!("{what}: the machine runs {s:.1}x slower than idle: bound {bound:?} -> {b:.0?}");
    b
}
