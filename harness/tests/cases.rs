//! `cargo test --test cases`: every YAML case of `cases/` as its own trial, per connector, on one
//! shared live engine (`emq::suites::cases::harness`). `--bless` (or `EMQ_BLESS=1`) rewrites
//! expectations from the reference connector instead of checking them — for authoring only.

use std::process::ExitCode;
use std::sync::Arc;

use emq::connector::Connector;
use emq::connector::child::{ChildConnector, ChildSpec};
use emq::connector::reference::Reference;
use emq::protocol::bundle::Bundle;
use emq::suites::cases::format::default_dir;
use emq::suites::cases::harness::{Setup, Subject, run, take_bless};

fn main() -> ExitCode {
    // Before any thread starts, so they all inherit it.
    emq::engine::cleanup::quiet_child_exits();
    let mut argv: Vec<String> = std::env::args().collect();
    let bless = take_bless(&mut argv) || emq::settings::bless();
    let mut subjects = vec![Subject {
        name: "reference".into(),
        make: Arc::new(|b| Ok(Box::new(Reference::new(b)) as Box<dyn Connector + Send>)),
    }];
    // The Python connector, when ci/provision installed it (in CI it must be there).
    let python = emq::settings::python_connector();
    if python.is_none() && emq::settings::in_ci() {
        eprintln!("CI is set but EMQ_PYTHON_CONNECTOR names no connector: run ci/provision");
        return ExitCode::from(2);
    }
    if let Some(cmd) = python.map(|p| p.display().to_string()) {
        subjects.push(Subject {
            name: "python".into(),
            make: Arc::new(move |_| {
                ChildConnector::spawn(&ChildSpec::new([cmd.clone()]))
                    .map(|c| Box::new(c) as Box<dyn Connector + Send>)
                    .map_err(|e| e.to_string())
            }),
        });
    }
    let ending = run(Setup {
        argv,
        bless,
        cases: emq::suites::cases::format::Corpus::at(default_dir()),
        bundle: Bundle::load_default(),
        engine: emq::cmd::cli::engine_options_from_env(),
        subjects,
    });
    if let Some(e) = &ending.error {
        emq::report::output::error(e);
    }
    ExitCode::from(ending.code)
}
