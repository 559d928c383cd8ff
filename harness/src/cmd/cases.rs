//! `emq-gate cases [FILTER] [--list] [--exact] [-- CMD...]`: the case corpus against any
//! connector, one trial per case, with the test target's output (`emq::suites::cases::harness`):
//! each failing case names `file:line` and shows `(-expected|+actual)`.
//!
//! Exit codes: 0 every selected case passed, 1 a case failed, 2 bad input (a malformed case file,
//! an empty selection), 3 no engine.

use std::sync::Arc;

use crate::cmd::cli::EngineArgs;
use crate::connector::Connector;
use crate::connector::child::{ChildConnector, ChildSpec};
use crate::connector::reference::Reference;
use crate::suites::cases::harness::{Ending, Setup, Subject, run};

/// What to run.
pub struct CasesOptions<'a> {
    pub engine: &'a EngineArgs,
    pub filter: Option<String>,
    pub list: bool,
    pub exact: bool,
    /// Trials run at once (each its own connector); `None`: libtest's default.
    pub threads: Option<usize>,
    /// The child connector; `None`: the in-process reference.
    pub child: Option<ChildSpec>,
    /// The bundle and cases judged by.
    pub dirs: &'a crate::cmd::sources::Dirs,
}

/// Runs the selected cases; the ending's code is already `emq-gate`'s (101 → 1).
pub fn cases(o: CasesOptions<'_>) -> Ending {
    let mut argv = vec!["emq-gate cases".to_string()];
    argv.extend(o.filter);
    if o.list {
        argv.push("--list".into());
    }
    if o.exact {
        argv.push("--exact".into());
    }
    if let Some(n) = o.threads {
        argv.extend(["--test-threads".into(), n.to_string()]);
    }
    let subject = match o.child {
        None => Subject {
            name: "reference".into(),
            make: Arc::new(|b| Ok(Box::new(Reference::new(b)) as Box<dyn Connector + Send>)),
        },
        Some(spec) => Subject {
            name: "connector".into(),
            make: Arc::new(move |_| {
                ChildConnector::spawn(&spec)
                    .map(|c| Box::new(c) as Box<dyn Connector + Send>)
                    .map_err(|e| e.to_string())
            }),
        },
    };
    let mut ending = run(Setup {
        argv,
        bless: false,
        cases: o.dirs.cases.clone(),
        bundle: o.dirs.load_bundle(),
        engine: Ok(o.engine.options()),
        subjects: vec![subject],
    });
    if ending.code == 101 {
        ending.code = 1;
    }
    ending
}
