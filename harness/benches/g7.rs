//! G7 throughput: drawn histories against the reference connector on a binary engine, judged by
//! the model (no shrinking: the reference agrees). Prints histories/s and calls/s.
//!
//! `cargo bench -p emq-harness --bench g7` (`EMQ_G7_BENCH_HISTORIES`, default 512;
//! `EMQ_G7_BENCH_SEED`, default 183).

use std::sync::Arc;
use std::time::Duration;

use emq::connector::Connector;
use emq::connector::reference::Reference;
use emq::engine::{Engine, EngineChoice, EngineOptions};
use emq::error::HarnessError;
use emq::gates::GateId;
use emq::protocol::bundle::Bundle;
use emq::suites::model::runner::{self, Env, Options};

fn main() {
    // `cargo test --benches` runs bench targets with no `--bench` flag: stay quick there.
    let benching = std::env::args().any(|a| a == "--bench");
    let histories: u32 = emq::settings::parsed(emq::settings::G7_BENCH_HISTORIES)
        .unwrap_or(if benching { 512 } else { 8 });
    let seed: u64 = emq::settings::parsed(emq::settings::G7_BENCH_SEED).unwrap_or(0xB7);
    let engine = Engine::start(&EngineOptions {
        choice: EngineChoice::Binary,
        // EMQ_VALKEY_SERVER, read where the command line reads it.
        valkey_server: emq::cmd::cli::engine_options_from_env()
            .ok()
            .and_then(|o| o.valkey_server),
        ..EngineOptions::default()
    })
    .expect("a binary engine (run ci/provision first)");
    let bundle = Arc::new(Bundle::load_default().expect("bundle"));
    let factory = move || -> Result<Box<dyn Connector + Send>, HarnessError> {
        Ok(Reference::boxed(&bundle))
    };
    let env = Env {
        engine: &engine,
        factory: &factory,
        db: GateId::G7.db(),
    };
    let report = runner::run(
        &env,
        &Options {
            histories,
            seed,
            max_shrink_time: Duration::from_secs(10),
            max_shrink_iters: 256,
            regressions: Vec::new(),
        },
    )
    .expect("the harness ran");
    if let Some(f) = &report.failure {
        panic!("the reference disagreed with the model: {}", f.message);
    }
    println!(
        "g7/reference ({}, seed {seed}): {} histories, {} calls in {:.2} s: {:.1} histories/s, {:.0} calls/s",
        engine.describe(),
        report.runs,
        report.calls,
        report.elapsed.as_secs_f64(),
        report.histories_per_s(),
        report.calls_per_s()
    );
}
