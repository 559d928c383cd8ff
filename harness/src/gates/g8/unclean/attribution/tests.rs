use super::*;
use crate::error::{ConnectorError, ErrorKind};

const OLD: &str = "old0000000000000000000000000000000000000";
const NEW: &str = "new0000000000000000000000000000000000000";

fn pos(offset: u64) -> Option<ReplPosition> {
    Some(ReplPosition {
        replid: OLD.into(),
        offset,
    })
}

fn facts() -> Facts {
    Facts {
        drained: Vec::new(),
        // The replica had the old history up to offset 999.
        take_over: Some(TakeOver {
            replid: NEW.into(),
            replid2: OLD.into(),
            second_repl_offset: 1000,
        }),
        fault_ms: 500,
        lossy_until_ms: 2000,
        announced_ms: 2000,
        workers: vec!["worker-1".into()],
        bound_ms: 1000,
    }
}

fn call(verb: Cmd, payload: &str, id: &str, at: u64) -> Call {
    Call {
        member: match verb {
            Cmd::Enqueue => "producer",
            _ => "worker-1",
        }
        .into(),
        verb,
        queue: "q".into(),
        victim: true,
        payload: Some(payload.into()),
        id: Some(id.into()),
        reply: Ok(id.into()),
        done: verb == Cmd::Complete,
        start_ms: at,
        end_ms: at + 1,
        pos: None,
    }
}

fn enqueue(payload: &str, id: &str, at: u64, offset: Option<u64>) -> Call {
    Call {
        pos: offset.and_then(pos),
        ..call(Cmd::Enqueue, payload, id, at)
    }
}

/// A worker that claimed on the failed-over queue after the announcement.
fn progressed() -> Call {
    Call {
        payload: None,
        id: None,
        reply: Ok("none".into()),
        ..call(Cmd::Claim, "later", "j0000000000000099", 2100)
    }
}

/// A reply that failed with kind engine.
fn engine(message: &str) -> Result<String, ConnectorError> {
    Err(ConnectorError::new(ErrorKind::Engine, message))
}

fn kinds(a: &[Anomaly]) -> Vec<(&str, &str)> {
    a.iter().map(|a| (a.kind, a.subject.as_str())).collect()
}

#[test]
fn a_lost_job_beyond_the_replicas_offset_is_the_engines() {
    let calls = vec![
        enqueue("a", "j0000000000000001", 100, Some(900)),
        call(Cmd::Claim, "a", "j0000000000000001", 150),
        call(Cmd::Complete, "a", "j0000000000000001", 160),
        enqueue("b", "j0000000000000002", 400, Some(1200)),
        Call {
            payload: Some("later".into()),
            ..enqueue("later", "j0000000000000002", 2050, None)
        },
        progressed(),
        call(Cmd::Complete, "later", "j0000000000000002", 2101),
    ];
    let v = attribute(&calls, &facts());
    assert_eq!(kinds(&v.engine), [("lost", "b")]);
    assert!(v.connector.is_empty(), "{:?}", v.connector);
    assert_eq!(v.acked, 3);
    // Read at 1200, the replica had up to 999: 201 bytes it never saw; lost 99 ms before the kill.
    assert_eq!((v.window_bytes, v.window_ms), (201, 0));
    assert_eq!(v.window_from_fault_ms, Some((-99, -99)));
    assert_eq!(v.first_claim_ms, Some(2101 - 500));
}

#[test]
fn a_lost_job_the_replica_had_is_the_connectors_with_its_calls() {
    let calls = vec![
        enqueue("a", "j0000000000000001", 100, Some(999)),
        progressed(),
    ];
    let v = attribute(&calls, &facts());
    assert_eq!(kinds(&v.connector), [("lost", "a")]);
    assert!(v.connector[0].calls[0].contains("producer enqueue(q, a j0000000000000001)"));
    assert!(v.connector[0].calls[0].contains("old00000:999"));
    assert!(v.engine.is_empty());
}

#[test]
fn an_unread_position_is_the_engines_only_before_the_announcement() {
    let mut calls = vec![enqueue("a", "j0000000000000001", 450, None), progressed()];
    assert_eq!(kinds(&attribute(&calls, &facts()).engine), [("lost", "a")]);
    calls[0] = enqueue("a", "j0000000000000001", 2500, None);
    assert_eq!(
        kinds(&attribute(&calls, &facts()).connector),
        [("lost", "a")]
    );
}

#[test]
fn a_job_on_another_shard_is_never_the_engines() {
    let mut e = enqueue("a", "j0000000000000001", 100, Some(5000));
    e.victim = false;
    let v = attribute(&[e, progressed()], &facts());
    assert_eq!(kinds(&v.connector), [("lost", "a")]);
}

#[test]
fn completed_twice_is_the_engines_only_when_the_first_complete_was_beyond_the_replica() {
    let first = |offset| Call {
        pos: pos(offset),
        ..call(Cmd::Complete, "a", "j0000000000000001", 300)
    };
    let mut f = facts();
    f.drained = vec![("a".into(), "j0000000000000001".into())];
    let run = |c: Call| {
        attribute(
            &[
                enqueue("a", "j0000000000000001", 100, Some(10)),
                call(Cmd::Claim, "a", "j0000000000000001", 200),
                c,
                progressed(),
            ],
            &f,
        )
    };
    let v = run(first(1500));
    assert_eq!(kinds(&v.engine), [("completed twice", "a")]);
    assert!(v.connector.is_empty(), "{:?}", v.connector);
    let v = run(first(800));
    assert_eq!(kinds(&v.connector), [("completed twice", "a")]);
}

#[test]
fn one_payload_under_two_ids_is_a_duplicate_and_one_never_sent_is_unexpected() {
    let calls = vec![
        enqueue("a", "j0000000000000001", 100, Some(10)),
        call(Cmd::Claim, "a", "j0000000000000001", 200),
        call(Cmd::Complete, "a", "j0000000000000001", 210),
        call(Cmd::Claim, "a", "j0000000000000002", 300),
        call(Cmd::Claim, "ghost", "j0000000000000003", 400),
        progressed(),
    ];
    let v = attribute(&calls, &facts());
    assert_eq!(
        kinds(&v.connector),
        [("duplicated", "a"), ("unexpected", "ghost")]
    );
}

#[test]
fn a_failed_enqueue_whose_job_exists_is_recovered() {
    let mut e = enqueue("a", "j0000000000000001", 100, None);
    e.reply = engine("connection reset");
    let mut f = facts();
    f.drained = vec![("a".into(), "j0000000000000001".into())];
    let v = attribute(&[e, progressed()], &f);
    assert_eq!((v.recovered, v.acked), (1, 0));
    assert!(v.connector.is_empty() && v.engine.is_empty());
}

#[test]
fn a_worker_that_never_claims_again_within_the_bound_made_no_progress() {
    let mut f = facts();
    f.workers.push("worker-2".into());
    let mut stuck = call(Cmd::Claim, "x", "j0000000000000005", 2200);
    stuck.member = "worker-2".into();
    stuck.payload = None;
    stuck.reply = engine("READONLY");
    let mut late = progressed();
    late.member = "worker-2".into();
    late.start_ms = 3500;
    late.end_ms = 3501;
    let v = attribute(&[progressed(), stuck, late], &f);
    assert_eq!(kinds(&v.connector), [("no progress", "worker-2")]);
    assert!(v.connector[0].calls[0].contains("READONLY"));
    assert_eq!(v.refused, 1);
}

#[test]
fn a_lost_job_whose_id_was_handed_out_again_and_completed_is_the_engines() {
    // `a` was acknowledged after the fault (its position unread), then lost; the promoted
    // replica's counter gave its id to `b`, whose worker completed `a` under it.
    let calls = vec![
        enqueue("a", "j0000000000000007", 2100, None),
        Call {
            payload: Some("b".into()),
            ..call(Cmd::Complete, "b", "j0000000000000007", 2300)
        },
        progressed(),
    ];
    let mut f = facts();
    f.lossy_until_ms = 500;
    let v = attribute(&calls, &f);
    assert_eq!(kinds(&v.engine), [("lost", "a")]);
}

#[test]
fn a_job_gone_after_a_complete_that_failed_is_not_lost() {
    let mut failed = call(Cmd::Complete, "a", "j0000000000000001", 300);
    failed.reply = engine("connection closed");
    failed.done = false;
    let calls = vec![
        enqueue("a", "j0000000000000001", 100, Some(10)),
        call(Cmd::Claim, "a", "j0000000000000001", 200),
        failed,
        progressed(),
    ];
    let v = attribute(&calls, &facts());
    assert!(v.connector.is_empty() && v.engine.is_empty(), "{v:?}");
    assert_eq!(v.completed_unacknowledged, 1);
}
