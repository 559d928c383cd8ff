//! `emq-gate`: see `emq-gate --help`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use emq::cmd::cli::{Cli, Command};
use emq::error::{ExitCode as Code, HarnessError};
use emq::report::Record;
use emq::report::output::{self, Progress};

fn code(c: Code) -> ExitCode {
    ExitCode::from(c as u8)
}

fn fail(e: &HarnessError) -> ExitCode {
    output::error(e);
    code(e.exit_code())
}

fn main() -> ExitCode {
    let code = dispatch();
    // After a Ctrl-C the handler is still removing engines; it ends the process itself.
    while emq::engine::cleanup::interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    code
}

fn dispatch() -> ExitCode {
    let cli = Cli::parse();
    output::set_quiet(cli.quiet);
    let progress = Progress::new();
    match cli.command {
        Command::Run { common, out } => {
            let record = match emq::cmd::run::run(&common.options(), &progress) {
                Ok(r) => r,
                Err(e) => return fail(&e),
            };
            if let Some(dir) = out
                && let Err(e) = record.write(&dir, &common.name)
            {
                return fail(&e);
            }
            output::result(&record.markdown());
            code(if record.passed() {
                Code::Pass
            } else {
                Code::GateFailed
            })
        }
        Command::Record { common, refresh } => {
            let record = match emq::cmd::run::run(&common.options(), &progress) {
                Ok(r) => r,
                Err(e) => return fail(&e),
            };
            let dir = emq::repo_relative("reports");
            match record.write_if_changed(&dir, &common.name, refresh) {
                Err(e) => return fail(&e),
                Ok(wrote) => {
                    output::result(&record.markdown());
                    output::note(&if wrote {
                        format!(
                            "wrote {}/{}.{{json,md,junit.xml}}",
                            dir.display(),
                            common.name
                        )
                    } else {
                        format!(
                            "{}/{}.json: no verdict, evidence, SHA or version changed; the committed \
                             files stay as they are (--refresh rewrites the figures)",
                            dir.display(),
                            common.name
                        )
                    });
                }
            }
            if let Ok(true) = emq::cmd::matrix::write_schema(&dir) {
                output::note(&format!("wrote {}/record.schema.json", dir.display()));
            }
            code(if record.passed() {
                Code::Pass
            } else {
                Code::GateFailed
            })
        }
        Command::Check { common } => {
            let path = emq::repo_relative("reports").join(format!("{}.json", common.name));
            let committed = match Record::load(&path) {
                Ok(r) => r,
                Err(e) => return fail(&e),
            };
            let mut opts = common.options();
            opts.seed = committed.header.seed;
            opts.histories = committed.header.histories;
            opts.batch = committed.header.batch;
            let fresh = match emq::cmd::run::run(&opts, &progress) {
                Ok(r) => r,
                Err(e) => return fail(&e),
            };
            let diffs = fresh.stable_differences(&committed);
            if diffs.is_empty() {
                output::result(&format!(
                    "{}: the committed record holds ({})",
                    path.display(),
                    fresh.footer.summary
                ));
                code(Code::Pass)
            } else {
                for d in &diffs {
                    output::error(d);
                }
                output::error(&format!(
                    "{} no longer holds: regenerate with `emq-gate record`",
                    path.display()
                ));
                code(Code::GateFailed)
            }
        }
        Command::Rules => {
            output::result(&emq::gates::rules::text());
            code(Code::Pass)
        }
        Command::Bench {
            engine,
            n,
            depths,
            repeat,
            cycles,
            no_gates,
            json,
            min_ratio,
            seed,
        } => {
            let opts = emq::cmd::bench::BenchOptions {
                engine: engine.options(),
                n,
                repeat,
                depths,
                cycles,
                gates: !no_gates,
                seed,
                histories: 256,
                batch: 100_000,
            };
            match emq::cmd::bench::bench(&opts, &progress) {
                Ok(report) => {
                    output::result(&if json { report.json() } else { report.text() });
                    let ok = min_ratio.is_none_or(|m| report.meets(m));
                    if !ok {
                        output::note("a depth ≥ 16 is below --min-ratio of valkey-benchmark");
                    }
                    code(if ok { Code::Pass } else { Code::GateFailed })
                }
                Err(e) => fail(&e),
            }
        }
        Command::Matrix(args) => match emq::cmd::matrix::matrix(&args.options(), &progress) {
            Ok(c) => code(c),
            Err(e) => fail(&e),
        },
        Command::Summary { files, format } => {
            match emq::cmd::summary::summary(&files, format == "json") {
                Ok(c) => code(c),
                Err(e) => fail(&e),
            }
        }
        Command::Smoke {
            engine,
            timeout,
            command,
        } => {
            let spec = emq::cmd::cli::child_spec(&command, timeout);
            match emq::cmd::smoke::smoke(&engine.options(), &spec, &progress) {
                Ok(report) => {
                    output::result(&report.text());
                    code(if report.passed() {
                        Code::Pass
                    } else {
                        Code::GateFailed
                    })
                }
                Err(e) => fail(&e),
            }
        }
    }
}
