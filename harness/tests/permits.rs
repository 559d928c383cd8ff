//! The permission doubles (`emq::doubles::permits`), live: each passes every gate on the engines
//! where its path differs from the reference's (a FAIL is a gate stricter than SPEC), and each
//! takes the path it is named for, on the wire (a PASS of a double that took no other path than
//! the reference's would prove nothing). `tests/gates.rs` judges the doubles that break a rule.

use std::process::ExitCode;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};

mod common;

use common::judge::{On, Subject, judge, snake};
use emq::doubles::permits::Taker;
use emq::gates::GateId;

/// The engines a permission double is judged on: those where its path differs from the
/// reference's (a cluster's node connections, a TLS cluster's certificates), and one engine.
/// The one that takes every permission is judged on all six engines of the matrix.
fn taker_engines(t: Taker) -> &'static [On] {
    match t {
        Taker::Permissive => &[
            On::One,
            On::Cluster,
            On::Tls,
            On::TlsCluster,
            On::Named("valkey-8.1"),
            On::Named("redis-7.0"),
        ],
        Taker::ReconnectReadsFirst | Taker::PingsEveryVerb => &[On::One],
        Taker::EagerNodeConnections | Taker::ReadsEverySlotMap => &[On::Cluster, On::TlsCluster],
        Taker::RetriesTryagain => &[On::Cluster],
        Taker::SentinelExtras => &[On::Sentinel],
        _ => &[On::One, On::Cluster],
    }
}

/// A permission double passes every gate (all eight: G6's cases and G7's histories too) on each
/// engine of [`taker_engines`]: a FAIL is a gate stricter than SPEC.
fn taker_trials(t: Taker) -> Vec<Trial> {
    let name = snake(&format!("{t:?}"));
    taker_engines(t)
        .iter()
        .map(|&on| {
            let suffix = match on {
                On::Cluster => "_on_a_cluster".to_string(),
                On::Tls => "_on_tls".to_string(),
                On::TlsCluster => "_on_a_tls_cluster".to_string(),
                On::Sentinel => "_on_sentinel".to_string(),
                On::TlsSentinel => "_on_tls_sentinel".to_string(),
                On::Named(name) => format!("_on_{}", name.replace(['-', '.'], "_")),
                On::One => String::new(),
            };
            Trial::test(format!("{name}_passes_every_gate{suffix}"), move || {
                judge(Subject::Taker(t), &Arc::default(), on, &GateId::ALL, &[])
            })
        })
        .collect()
}

/// Each permission double of one engine takes the path it is named for, on the wire: a PASS of a
/// double that took no other path than the reference's would prove nothing. `MONITOR` and the
/// engine's client list are the witnesses.
fn permission_doubles_take_their_paths() -> Result<(), Failed> {
    use emq::connector::Verbs;
    let e = common::binary_engine();
    let bundle = common::bundle();
    let mut wrong = Vec::new();
    for (i, t) in Taker::ALL.into_iter().enumerate() {
        let witness: fn(&[String], &str) -> bool = match t {
            Taker::HmgetPayloads => |m, _| m.iter().any(|l| l.contains("\"HMGET\" \"emq:")),
            Taker::Resp3Hello => |_, clients| clients.contains("resp=3"),
            Taker::GreetsEachConnection => |m, clients| {
                clients.contains("name=echomq-permits")
                    && ["\"PING\"", "\"DISCARD\"", "\"SETNAME\""]
                        .iter()
                        .all(|c| m.iter().any(|l| l.contains(c)))
            },
            Taker::PingsEveryVerb => {
                |m, _| m.iter().filter(|l| l.contains("\"PING\"")).count() >= 5
            }
            // How a pipeline is cut into writes is invisible to MONITOR: their unit is the
            // reference's `send_round`, their live judge G5's proxy (it reads RESP across writes).
            Taker::WritePerCommand | Taker::LoneFirstEnqueue => continue,
            Taker::ReconnectReadsFirst => |m, _| {
                // After the kill: a new connection whose first EchoMQ command is the ZCARD.
                let after = m.iter().skip_while(|l| !l.contains("emq-permits-kill"));
                let zcard = after.clone().find(|l| l.contains("\"ZCARD\""));
                zcard.is_some_and(|z| {
                    let client = z.split(']').next().unwrap_or_default().to_string();
                    let first_fence = after
                        .clone()
                        .position(|l| l.starts_with(&client) && l.contains("emq:fence"));
                    let first_read = after.clone().position(|l| l == z);
                    first_fence.is_some() && first_read < first_fence
                })
            },
            // Their paths differ from the reference's on a cluster (or on every engine at once).
            Taker::EagerNodeConnections
            | Taker::ReadsEverySlotMap
            | Taker::RetriesTryagain
            | Taker::Permissive => continue,
            // Its path is a Sentinel's, which this single engine has none of; its PASS on a
            // Sentinel engine is judged with every Sentinel's ACL LOG (R11.4).
            Taker::SentinelExtras => continue,
            // Its witness is G8's reset-on-connect fault: only that closes a connection so early.
            Taker::RedialsAtConnect => continue,
            Taker::ShortestReadTimeout => continue, // G1's held reply is its witness: R5.13 passes.
        };
        let db = 2 + i as u32;
        let mut admin = e.admin(db).map_err(|x| x.to_string())?;
        let monitor = admin.monitor().map_err(|x| x.to_string())?;
        let mut c = t.make(&bundle);
        let run = (|| -> Result<(), emq::error::ConnectorError> {
            c.connect("p", e.url(db).as_str())?;
            c.batch("p", "q", 5, 2, "x")?;
            c.browse("p", "q", 0, 10)?;
            c.pending_size("p", "q")?;
            if t == Taker::ReconnectReadsFirst {
                for client in admin.client_list().unwrap_or_default() {
                    if client.db == db && client.cmd != "monitor" {
                        let _ = admin.client_kill(&client);
                    }
                }
                let _ = admin.query::<String>(&["ECHO", "emq-permits-kill"]);
                let _ = c.pending_size("p", "q"); // fails: the connection was killed
                c.pending_size("p", "q")?; // on a new connection, before any fence read
                c.enqueue("p", "q", "y", 0)?;
            }
            Ok(())
        })();
        let clients: String = admin.query(&["CLIENT", "LIST"]).unwrap_or_default();
        let lines = monitor.stop().map_err(|x| x.to_string())?;
        let mine: Vec<String> = lines
            .into_iter()
            .filter(|l| l.contains(&format!("[{db} ")))
            .map(|l| l.split_once(' ').map_or(l.clone(), |(_, r)| r.to_string()))
            .collect();
        if let Err(err) = run {
            wrong.push(format!("{t:?}: {err}"));
        } else if !witness(&mine, &clients) {
            wrong.push(format!(
                "{t:?} did not take its path: {} MONITOR lines, the first: {:#?}",
                mine.len(),
                mine.iter().take(12).collect::<Vec<_>>()
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n").into())
    }
}

fn main() -> ExitCode {
    // Before libtest-mimic starts its threads, so they all inherit it.
    emq::engine::cleanup::quiet_child_exits();
    let mut args = Arguments::from_args();
    // As in `tests/gates.rs`: a trial mostly waits on an engine, not on the CPU.
    args.test_threads.get_or_insert(6);
    let mut trials = vec![Trial::test(
        "permission_doubles_take_their_paths",
        permission_doubles_take_their_paths,
    )];
    for t in Taker::ALL {
        trials.extend(taker_trials(t));
    }
    libtest_mimic::run(&args, trials).exit_code()
}
