//! `emq-gate`: see `emq-gate --help`.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use emq::cmd::cli::{Cli, Command, Common, EngineArgs};
use emq::cmd::sources::Dirs;
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
    emq::engine::cleanup::quiet_child_exits();
    let code = dispatch();
    // After a Ctrl-C the handler is still removing engines; it ends the process itself.
    while emq::engine::cleanup::interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    code
}

/// Parses the command line, then hands each command to its own function below.
fn dispatch() -> ExitCode {
    let cli = Cli::parse();
    output::set_quiet(cli.quiet);
    // The bundle and cases for the whole run (embedded unless --bundle/--cases); kept until exit
    // (an embedded copy is a temp directory), and handed to every command that judges.
    let sources = match emq::cmd::sources::resolve(cli.bundle.clone(), cli.cases.clone()) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    command(cli.command, &sources.dirs, &Progress::new())
}

/// One command, handed to its own function.
fn command(command: Command, dirs: &Dirs, progress: &Progress) -> ExitCode {
    match command {
        Command::Run {
            common,
            out,
            rerun_failed,
        } => run(&common, dirs, out, rerun_failed.as_deref(), progress),
        Command::Record { common, refresh } => {
            exit(emq::cmd::record::record(&common, dirs, refresh, progress))
        }
        Command::Check { common } => exit(emq::cmd::record::check(&common, dirs, progress)),
        Command::Rules => rules(),
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
            timeout,
            connector,
            io_threads,
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
                dirs: dirs.clone(),
                connector,
                timeout,
                io_threads,
            };
            bench(&opts, json, min_ratio, progress)
        }
        Command::Matrix(args) => matrix(&args, dirs, progress),
        Command::Diff { old, new } => exit(emq::cmd::diff::run(&old, &new)),
        Command::Summary { files, format } => exit(emq::cmd::summary::summary(&files, format)),
        Command::Smoke {
            engine,
            timeout,
            command,
            wire_log,
        } => smoke(&engine, dirs, &command, timeout, wire_log, progress),
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
            let child = case_child(&command, timeout, wire_log.as_ref(), dirs);
            cases(emq::cmd::cases::CasesOptions {
                engine: &engine,
                filter,
                list,
                exact,
                threads,
                child,
                dirs,
            })
        }
    }
}

/// `matrix`: merge the shards' grids, or judge every cell.
fn matrix(args: &emq::cmd::cli::MatrixArgs, dirs: &Dirs, progress: &Progress) -> ExitCode {
    match &args.action {
        Some(emq::cmd::cli::MatrixAction::Merge {
            dirs,
            check,
            refresh,
            reports,
        }) => exit(emq::cmd::matrix::merge(
            dirs,
            *check,
            *refresh,
            &reports
                .clone()
                .unwrap_or_else(|| emq::repo_relative("reports")),
        )),
        None => exit(emq::cmd::matrix::matrix(&args.options(dirs), progress)),
    }
}

/// The child connector `cases` judges (`None`: the in-process reference).
fn case_child(
    command: &[String],
    timeout: u64,
    wire_log: Option<&PathBuf>,
    dirs: &Dirs,
) -> Option<emq::connector::child::ChildSpec> {
    (!command.is_empty())
        .then(|| emq::cmd::sources::child_spec_logged(command, timeout, wire_log, &dirs.bundle))
}

/// `cases`: the cases judged, and the error that ended them said.
fn cases(opts: emq::cmd::cases::CasesOptions) -> ExitCode {
    let ending = emq::cmd::cases::cases(opts);
    if let Some(e) = &ending.error {
        output::error(e);
    }
    ExitCode::from(ending.code)
}

/// A command that chose its own exit code, or failed.
fn exit(r: Result<Code, HarnessError>) -> ExitCode {
    match r {
        Ok(c) => code(c),
        Err(e) => fail(&e),
    }
}

fn verdict(passed: bool) -> ExitCode {
    code(if passed { Code::Pass } else { Code::GateFailed })
}

/// `run`: the gates (those `rerun` did not pass, when given), the record written under `out`
/// when asked, the Markdown printed, what the baseline made of it said.
fn run(
    common: &Common,
    dirs: &Dirs,
    out: Option<PathBuf>,
    rerun: Option<&std::path::Path>,
    progress: &Progress,
) -> ExitCode {
    use emq::cmd::finish;
    // A bad baseline is refused before an engine boots.
    let baseline = match finish::baseline(common) {
        Ok(b) => b,
        Err(e) => return fail(&e),
    };
    let mut options = common.options(dirs);
    let mut again = None;
    if let Some(path) = rerun {
        match emq::cmd::rerun::prepare(path, options.clone(), common.engine.engine_name.is_some()) {
            Ok(Some(r)) => {
                options = r.options.clone();
                again = Some(r);
            }
            Ok(None) => {
                output::note(&format!(
                    "{}: every gate it ran passed; nothing to rerun",
                    path.display()
                ));
                return code(Code::Pass);
            }
            Err(e) => return fail(&e),
        }
    }
    let mut record = match emq::cmd::run::run(&options, progress) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let stem = emq::cmd::record::stem_after(common, &options.subject, &record);
    let cases_to = finish::cases_to(out.as_deref(), stem.as_deref().ok());
    finish::annotate_record(&mut record, common, &options, baseline.as_ref(), &cases_to);
    if let Some(dir) = out {
        let written = stem.and_then(|stem| {
            record.write(&dir, &stem)?;
            emq::report::badge::write_if_changed(
                &dir,
                &stem,
                &emq::report::badge::for_record(&record),
            )
        });
        if let Err(e) = written {
            return fail(&e);
        }
    }
    output::result(&record.markdown());
    finish::say_baseline(&record);
    let rerun_gates = again.as_ref().map(|r| r.gates.as_slice());
    if let (Some(path), Some(r)) = (rerun, &again) {
        output::note(&emq::cmd::rerun::summary(path, r, &record));
    }
    code(finish::exit_code(&record, rerun_gates))
}

/// `bench`: the report printed; below `min_ratio` at a depth ≥ 16 is a failure.
fn bench(
    opts: &emq::cmd::bench::BenchOptions,
    json: bool,
    min_ratio: Option<f64>,
    progress: &Progress,
) -> ExitCode {
    match emq::cmd::bench::bench(opts, progress) {
        Ok(report) => {
            output::result(&if json { report.json() } else { report.text() });
            let ok = min_ratio.is_none_or(|m| report.meets(m));
            if !ok {
                output::note("a depth ≥ 16 is below --min-ratio of valkey-benchmark");
            }
            verdict(ok)
        }
        Err(e) => fail(&e),
    }
}

/// `rules`: the catalogue printed; a rule without a check or case fails.
fn rules() -> ExitCode {
    output::result(&format!(
        "contract {} (catalogue {}; SPEC §12 lists what each version added and changed)\n{}",
        emq::gates::contract::current(),
        emq::gates::contract::catalogue_digest(),
        emq::gates::rules::text()
    ));
    verdict(emq::gates::rules::complete())
}

fn smoke(
    engine: &EngineArgs,
    dirs: &Dirs,
    command: &[String],
    timeout: u64,
    wire_log: Option<PathBuf>,
    progress: &Progress,
) -> ExitCode {
    let spec =
        emq::cmd::sources::child_spec_logged(command, timeout, wire_log.as_ref(), &dirs.bundle);
    match emq::cmd::smoke::smoke(&engine.options(), &spec, &dirs.bundle, progress) {
        Ok(report) => {
            output::result(&report.text());
            verdict(report.passed())
        }
        Err(e) => fail(&e),
    }
}
