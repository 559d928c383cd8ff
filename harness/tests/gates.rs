//! Self-tests of G1–G5 and G8, generated from the doubles: the reference connector passes each
//! gate; each deliberately broken double fails each gate its rules and its table entry name
//! (`emq::gates::rules::gates_failing`: one trial per double and gate, `<double>_fails_<gate>`)
//! and passes the others (`<double>_passes_the_other_gates`). A double of SPEC §8 is judged on a
//! cluster (`..._on_a_cluster`) and passes every gate on a single engine
//! (`<double>_passes_every_gate_on_one_engine`). A double the Python connector plays is ignored
//! where that connector is not provisioned (never in CI). G6 and G7 are judged by
//! `tests/case_doubles.rs` and `tests/interleavings.rs`.
//!
//! The permission doubles are judged by `tests/permits.rs`; both judge through
//! `common::judge`.
//!
//! The trials of one double share one engine of their own, one trial at a time (its gates ran
//! in one run before: `SCRIPT FLUSH`, `CONFIG RESETSTAT` and `MONITOR` are not shared between
//! trials that run at once); every other trial boots its own.

use std::process::ExitCode;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};

mod common;

use common::judge::{On, Shared, Subject, judge, mine, seed, snake};
use emq::connector::reference::Reference;
use emq::doubles::{Double, TABLE};
use emq::gates::rules::{gates_failing, is_cluster_double, is_sentinel_double, is_tls_double};
use emq::gates::{GateContext, GateId, Verdict};
use emq::protocol::bundle::Bundle;

/// The trials of one double: one per gate of [`mine`] it must fail, one for the gates it must
/// pass; a double of §8 also passes every gate on a single engine. With the weight of its engine
/// ([`weight`]).
fn double_trials(d: Double, python: bool) -> (u8, Vec<Trial>) {
    let mine = mine();
    let fail: Vec<GateId> = gates_failing(d)
        .into_iter()
        .filter(|g| mine.contains(g))
        .collect();
    if fail.is_empty() {
        return (0, Vec::new());
    }
    let on_engine = if d.on_tls_cluster() {
        On::TlsCluster
    } else if d.on_tls_sentinel() {
        On::TlsSentinel
    } else if is_sentinel_double(d) {
        On::Sentinel
    } else if is_cluster_double(d) {
        On::Cluster
    } else if is_tls_double(d) {
        On::Tls
    } else {
        On::One
    };
    let on = match on_engine {
        On::Cluster => "_on_a_cluster",
        On::Tls => "_on_tls",
        On::TlsCluster => "_on_a_tls_cluster",
        On::Sentinel => "_on_sentinel",
        On::TlsSentinel => "_on_tls_sentinel",
        On::One | On::Named(_) => "",
    };
    let engine: Shared = Arc::default();
    // On a cluster a trial that runs G8 boots its own engine: G8's failovers leave another node
    // primary, and a trial after them on the same engine (in whatever order the trials ran)
    // watched the old primaries (`MONITOR saw no script`, an install of no field): a verdict by
    // trial order. The others share one, as on a single engine (one cluster per trial at six
    // trials at a time ran out of file descriptors).
    let own = |engine: &Shared, gates: &[GateId]| -> Shared {
        if matches!(
            on_engine,
            On::Cluster | On::TlsCluster | On::Sentinel | On::TlsSentinel
        ) && gates.contains(&GateId::G8)
        {
            Arc::default()
        } else {
            engine.clone()
        }
    };
    let mut trials = Vec::new();
    for &g in &fail {
        let engine = own(&engine, &[g]);
        trials.push(Trial::test(
            format!(
                "{}_fails_{}{on}",
                snake(&format!("{d:?}")),
                g.as_str().to_ascii_lowercase()
            ),
            move || judge(Subject::Double(d), &engine, on_engine, &[g], &[g]),
        ));
    }
    let others: Vec<GateId> = mine.iter().copied().filter(|g| !fail.contains(g)).collect();
    if !others.is_empty() {
        let engine = own(&engine, &others);
        trials.push(Trial::test(
            format!("{}_passes_the_other_gates{on}", snake(&format!("{d:?}"))),
            move || judge(Subject::Double(d), &engine, on_engine, &others, &[]),
        ));
    }
    if on_engine != On::One {
        let single: Shared = Arc::default();
        trials.push(Trial::test(
            format!(
                "{}_passes_every_gate_on_one_engine",
                snake(&format!("{d:?}"))
            ),
            move || judge(Subject::Double(d), &single, On::One, &mine, &[]),
        ));
    }
    let ignored = d.is_python() && !python;
    let trials = trials
        .into_iter()
        .map(|t| t.with_ignored_flag(ignored))
        .collect();
    (weight(on_engine), trials)
}

/// How long a trial on this engine takes, roughly: a cluster boots six nodes and runs G8's
/// failovers and migrations; a single engine is up in milliseconds.
fn weight(on: On) -> u8 {
    match on {
        On::TlsCluster => 5,
        On::Cluster => 4,
        On::Sentinel | On::TlsSentinel => 3,
        On::Tls => 2,
        On::One | On::Named(_) => 1,
    }
}

/// The order the pool takes the trials in (it takes them in order): the heaviest first, and the
/// trials that share an engine apart. In a double's order its trials sat side by side, so the
/// pool's threads took them together and all but one waited for the double's engine: measured
/// on two cores, the last minutes of `ci/test` (`gates` alone) ran at 33–88 % CPU, and `gates`
/// took 651 s in that order against 566–636 s in this one.
fn interleaved(mut groups: Vec<(u8, Vec<Trial>)>) -> Vec<Trial> {
    groups.sort_by_key(|(w, _)| std::cmp::Reverse(*w));
    let mut queues: Vec<std::vec::IntoIter<Trial>> =
        groups.into_iter().map(|(_, t)| t.into_iter()).collect();
    let mut order = Vec::new();
    loop {
        let before = order.len();
        order.extend(queues.iter_mut().filter_map(Iterator::next));
        if order.len() == before {
            return order;
        }
    }
}

/// Every double is caught by some gate, and one that fails more than one gate here says why.
fn the_table_says_why_a_double_fails_twice() -> Result<(), Failed> {
    let mine = mine();
    let mut wrong = Vec::new();
    for e in TABLE {
        let gates = gates_failing(e.double);
        if gates.is_empty() {
            wrong.push(format!("{:?} is caught by nothing", e.double));
        }
        if gates.iter().filter(|g| mine.contains(g)).count() > 1 && e.why_also.is_empty() {
            wrong.push(format!(
                "{:?}: say why it fails more than one gate",
                e.double
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n").into())
    }
}

/// On a cluster the engine itself refuses the untagged root: G4 says so.
fn untagged_root_is_refused_by_the_cluster_engine() -> Result<(), Failed> {
    let e = common::cluster_engine();
    let bundle = common::bundle();
    let factory = Double::UntaggedRoot.factory(&bundle);
    let ctx = GateContext {
        seed: seed(),
        ..common::gate_context(&e, &bundle, factory.as_ref())
    };
    let g4 = common::run(&ctx, GateId::G4);
    assert_eq!(g4.verdict, Verdict::Fail, "{:?}", g4.evidence);
    assert!(
        g4.evidence.iter().any(|l| l
            .text
            .contains("the engine refused a script call that touched a key outside its slot")),
        "{:?}",
        g4.evidence
    );
    Ok(())
}

/// SPEC R4.19, for the right reason: the reference's url names the connector's user, which the
/// engine refuses `INFO`; each ACL double's G1 FAIL is the `ACL LOG` line naming the rule, the
/// command (or the failed `AUTH`) and the user; and the log is empty again after the gate.
fn the_acl_log_names_the_refused_command_the_failed_auth_and_the_user() -> Result<(), Failed> {
    use emq::engine::admin::Admin;
    let e = common::binary_engine();
    let url = e.url(3);
    assert!(url.starts_with("redis://emq:"), "{url}");
    let mut as_connector = Admin::connect(&url).map_err(|x| x.to_string())?;
    let refused = as_connector.query::<String>(&["INFO", "server"]);
    assert!(
        refused.as_ref().is_err_and(|x| x
            .to_string()
            .contains("no permissions to run the 'info' command")),
        "{refused:?}"
    );
    e.admin(0)
        .map_err(|x| x.to_string())?
        .acl_log_take()
        .map_err(|x| x.to_string())?;
    let bundle = common::bundle();
    for (d, want) in [
        (
            Double::InfoAtConnect,
            "R4.19: the engine refused INFO to user \"emq\"",
        ),
        (
            Double::AuthWithoutUser,
            "R4.19: AUTH failed as user \"default\"",
        ),
    ] {
        let factory = d.factory(&bundle);
        let ctx = GateContext {
            seed: seed(),
            ..common::gate_context(&e, &bundle, factory.as_ref())
        };
        let g1 = common::run(&ctx, GateId::G1);
        assert_eq!(g1.verdict, Verdict::Fail, "{d:?}: {:?}", g1.evidence);
        assert!(
            g1.evidence.iter().any(|l| l.text.starts_with(want)),
            "{d:?}: no line starting {want:?} in {:#?}",
            g1.evidence
        );
        let left = e.admin(0).map_err(|x| x.to_string())?.acl_log_take();
        assert_eq!(
            left.map(|l| l.len()).ok(),
            Some(0),
            "the gate resets the log"
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    // Before libtest-mimic starts its threads, so they all inherit it.
    emq::engine::cleanup::quiet_child_exits();
    let mut args = Arguments::from_args();
    // Six trials at a time unless told (`--test-threads`): a trial mostly waits on an engine, a
    // fault or a failover, not on the CPU. On two cores the binary took 324 s at 2 threads, 210 s
    // at 4, 162 s at 6. The trials of one double still take turns on its engine.
    args.test_threads.get_or_insert(6);
    let python = emq::settings::python_connector().is_some() || emq::settings::in_ci();
    let mut groups: Vec<(u8, Vec<Trial>)> = [
        ("", On::One),
        ("_on_a_cluster", On::Cluster),
        ("_on_tls", On::Tls),
        ("_on_a_tls_cluster", On::TlsCluster),
        ("_on_sentinel", On::Sentinel),
        ("_on_tls_sentinel", On::TlsSentinel),
    ]
    .into_iter()
    .map(|(on_name, on)| {
        let mine = mine();
        let t = Trial::test(format!("reference_passes_every_gate{on_name}"), move || {
            judge(Subject::Reference, &Arc::default(), on, &mine, &[])
        });
        (weight(on), vec![t])
    })
    .collect();
    let mine = mine();
    let others = [
        // A child process, so `Connector::kill` really kills it.
        (
            weight(On::One),
            Trial::test("python_connector_passes_every_gate", move || {
                judge(Subject::Python, &Arc::default(), On::One, &mine, &[])
            })
            .with_ignored_flag(!python),
        ),
        (
            weight(On::Cluster),
            Trial::test(
                "untagged_root_is_refused_by_the_cluster_engine",
                untagged_root_is_refused_by_the_cluster_engine,
            ),
        ),
        (
            weight(On::One),
            Trial::test("the_fault_proxy_acts_on_the_command_it_is_told", || {
                the_fault_proxy_acts_on_the_command_it_is_told();
                Ok(())
            }),
        ),
        (
            0,
            Trial::test(
                "the_table_says_why_a_double_fails_twice",
                the_table_says_why_a_double_fails_twice,
            ),
        ),
        (
            weight(On::One),
            Trial::test(
                "the_acl_log_names_the_refused_command_the_failed_auth_and_the_user",
                the_acl_log_names_the_refused_command_the_failed_auth_and_the_user,
            ),
        ),
    ];
    groups.extend(others.into_iter().map(|(w, t)| (w, vec![t])));
    groups.extend(Double::all().map(|d| double_trials(d, python)));
    libtest_mimic::run(&args, interleaved(groups)).exit_code()
}

/// The fault proxy, live: each fault acts on exactly the command its rule picks, also inside a
/// pipeline, and the engine's state says which commands ran.
fn the_fault_proxy_acts_on_the_command_it_is_told() {
    use emq::connector::Verbs;
    use emq::engine::admin::Admin;
    use emq::faults::{Fault, Matcher, Proxy, Rule};
    use std::time::Duration;

    let e = common::binary_engine();
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let db = 5;
    let mut direct = e.prepare_db(db).unwrap();
    let proxy = Proxy::start(&format!("{}:{}", e.host, e.port)).unwrap();
    let url = proxy.url_for(&e.url(db), &e.host, e.port);
    let incr = |fault, skip| Rule {
        matcher: Matcher {
            name: Some("incr".into()),
            ..Matcher::default()
        },
        skip,
        fault,
    };
    let counter = |a: &mut Admin| a.query::<Option<i64>>(&["GET", "k"]).unwrap();
    let through = || Admin::connect(&url).unwrap();

    // Passing through, then each fault on the next INCR.
    assert_eq!(through().query::<i64>(&["INCR", "k"]).unwrap(), 1);
    for (fault, after) in [
        (Fault::LostReply, 2),
        (Fault::DropBefore, 2),
        (Fault::CutReply, 3),
    ] {
        let mut a = through();
        proxy.arm(incr(fault, 0));
        assert!(a.query::<i64>(&["INCR", "k"]).is_err(), "{fault:?}");
        assert_eq!(counter(&mut direct), Some(after), "{fault:?}");
        let fired = proxy.take_fired();
        assert_eq!(fired.len(), 1);
        assert_eq!(
            (fired[0].label(&bundle).as_str(), fired[0].fault),
            ("INCR k", fault)
        );
    }
    let mut a = through();
    proxy.arm(incr(Fault::Delay(Duration::from_millis(300)), 0));
    let t0 = std::time::Instant::now();
    assert_eq!(a.query::<i64>(&["INCR", "k"]).unwrap(), 4);
    assert!(t0.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        a.query::<i64>(&["INCR", "k"]).unwrap(),
        5,
        "the connection lives on"
    );

    // Reset on connect, then the n-th command of a connection.
    proxy.arm(Rule {
        matcher: Matcher::default(),
        skip: 0,
        fault: Fault::ResetOnConnect,
    });
    assert!(
        Admin::connect(&url)
            .and_then(|mut a| a.query::<i64>(&["INCR", "k"]))
            .is_err()
    );
    let before = proxy.counts();
    let mut a = through();
    assert_eq!(proxy.counts().0, before.0 + 1);
    // The handshake counts too: learn the first INCR's index (a zero delay), drop the next one.
    proxy.arm(incr(Fault::Delay(Duration::ZERO), 0));
    assert_eq!(a.query::<i64>(&["INCR", "k"]).unwrap(), 6);
    let n = proxy.take_fired()[0].index + 1;
    proxy.arm(Rule {
        matcher: Matcher::nth(n),
        skip: 0,
        fault: Fault::DropBefore,
    });
    assert!(a.query::<i64>(&["INCR", "k"]).is_err());
    assert_eq!(counter(&mut direct), Some(6));
    assert_eq!(proxy.take_fired()[0].index, n);

    // A pipeline of 100 INCR with the 50th's reply lost: 50 ran, nothing after it was forwarded.
    let mut c = Reference::boxed(&bundle);
    c.connect("p", &url).unwrap();
    proxy.arm(incr(Fault::LostReply, 49));
    assert!(c.pipeline_probe("p", "probe", 100).is_err());
    assert_eq!(
        direct.query::<Option<i64>>(&["GET", "probe"]).unwrap(),
        Some(50)
    );
    let fired = proxy.take_fired();
    assert_eq!(fired.len(), 1);
}
