//! `emq-gate`: see `emq-gate --help`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use emq::cmd::cli::{Cli, Command};
use emq::error::{ExitCode as Code, HarnessError};
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
    // The bundle and cases for the whole run (embedded unless --bundle/--cases); kept until exit.
    let _sources = match emq::cmd::sources::resolve(cli.bundle.clone(), cli.cases.clone()) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let progress = Progress::new();
    match cli.command {
        Command::Run { common, out } => {
            let record = match emq::cmd::run::run(&common.options(), &progress) {
                Ok(r) => r,
                Err(e) => return fail(&e),
            };
            if let Some(dir) = out {
                let options = common.options();
                let written = emq::cmd::record::stem_after(&common, &options.subject, &record)
                    .and_then(|stem| record.write(&dir, &stem));
                if let Err(e) = written {
                    return fail(&e);
                }
            }
            output::result(&record.markdown());
            code(if record.passed() {
                Code::Pass
            } else {
                Code::GateFailed
            })
        }
        Command::Record { common, refresh } => {
            match emq::cmd::record::record(&common, refresh, &progress) {
                Ok(c) => code(c),
                Err(e) => fail(&e),
            }
        }
        Command::Check { common } => match emq::cmd::record::check(&common, &progress) {
            Ok(c) => code(c),
            Err(e) => fail(&e),
        },
        Command::Rules => {
            output::result(&emq::gates::rules::text());
            code(if emq::gates::rules::complete() {
                Code::Pass
            } else {
                Code::GateFailed
            })
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
                histories: emq::cmd::cli::HISTORIES,
                batch: emq::cmd::cli::BATCH,
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
            wire_log,
        } => {
            let spec = emq::cmd::sources::child_spec_logged(&command, timeout, wire_log.as_ref());
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
        Command::Cases {
            engine,
            filter,
            list,
            exact,
            threads,
            timeout,
            wire_log,
            command,
        } => {
            let child = (!command.is_empty()).then(|| {
                emq::cmd::sources::child_spec_logged(&command, timeout, wire_log.as_ref())
            });
            let ending = emq::cmd::cases::cases(emq::cmd::cases::CasesOptions {
                engine: &engine,
                filter,
                list,
                exact,
                threads,
                child,
            });
            if let Some(e) = &ending.error {
                output::error(e);
            }
            ExitCode::from(ending.code)
        }
    }
}
