//! Engine-free tests of the accounting.
use super::*;

fn job(payload: &str, set: Set, attempts: i64, due: bool) -> Job {
    Job {
        payload: payload.into(),
        set,
        attempts,
        due,
    }
}

/// Two pending jobs, j1 and j2.
fn two_pending() -> Snapshot {
    let mut s = Snapshot::default();
    enqueue(&mut s, "a");
    enqueue(&mut s, "b");
    s
}

fn rec(call: Request, outcome: Outcome) -> Record {
    Record {
        label: format!("{} (test)", call.cmd()),
        call,
        outcome,
    }
}

/// A request on the test's one queue.
fn on_q(session_and_queue: impl FnOnce(String, String) -> Request) -> Request {
    session_and_queue("s".into(), "q".into())
}

fn enqueue_of(payload: &str) -> Request {
    on_q(|session, queue| Request::Enqueue {
        session,
        queue,
        payload: payload.into(),
        delay_ms: 0,
    })
}

fn failed() -> Outcome {
    Outcome::Failed("engine".into())
}

#[test]
fn an_indeterminate_enqueue_may_or_may_not_have_happened() {
    let pre = Snapshot::default();
    let call = enqueue_of("t1");
    let r = [rec(call.clone(), failed())];
    assert!(account(&pre, &r, &pre).is_empty());
    let (ran, _) = apply(&pre, &call);
    assert!(account(&pre, &r, &ran).is_empty());
    // Twice is once too many, and the breach names the call and the extra job.
    let (twice, _) = apply(&ran, &call);
    let b = account(&pre, &r, &twice);
    assert!(
        b[0].starts_with(
            "duplicate: enqueue (test) ran twice (failed with kind engine): it made 2 jobs"
        ),
        "{b:?}"
    );
    assert!(b[0].contains("j0000000000000002"), "{b:?}");
}

#[test]
fn a_successful_enqueue_happened_exactly_once() {
    let pre = Snapshot::default();
    let call = enqueue_of("t1");
    let (once, _) = apply(&pre, &call);
    let (twice, _) = apply(&once, &call);
    let ok2 = [rec(call.clone(), Outcome::Ok(Reply::Id(job_id(2))))];
    // A re-send after a lost reply: the reply names j2, so j1 is the extra job.
    let b = account(&pre, &ok2, &twice);
    assert!(
        b[0].contains("made 2 jobs") && b[0].contains("extra [\"j0000000000000001\"]"),
        "{b:?}"
    );
    // Acknowledged, yet no job: lost.
    let ok1 = [rec(call, Outcome::Ok(Reply::Id(job_id(1))))];
    let b = account(&pre, &ok1, &pre);
    assert!(
        b.iter()
            .any(|l| l.starts_with("lost: enqueue (test) was acknowledged with j0000000000000001")),
        "{b:?}"
    );
    assert!(account(&pre, &ok1, &once).is_empty());
}

#[test]
fn a_fabricated_id_is_a_reply_the_engine_never_gave() {
    let pre = two_pending();
    let call = enqueue_of("t");
    let r = [rec(call, Outcome::Ok(Reply::Id(job_id(0))))];
    let b = account(&pre, &r, &pre);
    assert!(
        b.iter().any(|l| l.contains(
            "answered j0000000000000000, but the scripts would have answered j0000000000000003 (a reply no run of the call gives)"
        )),
        "{b:?}"
    );
}

#[test]
fn claims_are_explained_by_calls() {
    let pre = two_pending();
    let call = on_q(|session, queue| Request::Claim {
        session,
        queue,
        lease_ms: 60_000,
    });
    let (one, reply) = apply(&pre, &call);
    assert!(account(&pre, &[rec(call.clone(), Outcome::Ok(reply.clone()))], &one).is_empty());
    assert!(account(&pre, &[rec(call.clone(), failed())], &one).is_empty());
    assert!(account(&pre, &[rec(call.clone(), failed())], &pre).is_empty());
    // Re-sent: two claims ran, the caller saw the second.
    let (two, second) = apply(&one, &call);
    let b = account(&pre, &[rec(call.clone(), Outcome::Ok(second))], &two);
    assert!(!b.is_empty());
    assert!(
        b.iter()
            .any(|l| l.contains("answered j0000000000000002 (attempts 1)")),
        "{b:?}"
    );
    // The engine gave that reply, to the second run: the line says the call ran twice, and
    // not that the engine never gave it.
    assert!(
        b.iter().any(|l| l.starts_with(
            "claim (test) ran twice: it answered j0000000000000002 (attempts 1), what a second run answers"
        )),
        "{b:?}"
    );
    assert!(!b.iter().any(|l| l.contains("no run")), "{b:?}");
    // Swallowed: null while a job was pending (whether or not the claim ran).
    for post in [&pre, &one] {
        let b = account(
            &pre,
            &[rec(call.clone(), Outcome::Ok(Reply::Claim(None)))],
            post,
        );
        assert!(b.iter().any(|l| l.contains("answered null")), "{b:?}");
    }
}

#[test]
fn a_complete_reported_true_must_have_run() {
    let mut pre = two_pending();
    let j1 = job_id(1);
    pre.jobs.insert(j1.clone(), job("a", Set::Active, 1, false));
    let call = on_q(|session, queue| Request::Complete {
        session,
        queue,
        id: j1.clone(),
        attempts: 1,
    });
    let (done, _) = apply(&pre, &call);
    assert!(!done.jobs.contains_key(&j1));
    let t = |o| [rec(call.clone(), o)];
    assert!(account(&pre, &t(Outcome::Ok(Reply::Done(true))), &done).is_empty());
    assert!(account(&pre, &t(failed()), &done).is_empty());
    assert!(account(&pre, &t(failed()), &pre).is_empty());
    // Never reached the engine, yet reported done.
    let b = account(&pre, &t(Outcome::Ok(Reply::Done(true))), &pre);
    assert!(
        b.iter()
            .any(|l| l.contains("should be") || l.contains("answered true")),
        "{b:?}"
    );
    // Ran twice (the second saw nothing to complete): reported false, yet gone.
    let b = account(&pre, &t(Outcome::Ok(Reply::Done(false))), &done);
    assert!(
        b.iter()
            .any(|l| l.starts_with("complete (test) ran twice: it answered false, what a second run answers, where the scripts answer true once")),
        "{b:?}"
    );
}

#[test]
fn retry_promote_and_reap_follow_the_scripts() {
    let mut pre = Snapshot::default();
    enqueue(&mut pre, "a");
    enqueue(&mut pre, "b");
    enqueue(&mut pre, "c");
    pre.jobs.insert(job_id(1), job("a", Set::Active, 1, true));
    pre.jobs.insert(job_id(2), job("b", Set::Active, 5, true));
    pre.jobs.insert(job_id(3), job("c", Set::Delayed, 1, true));
    let (s, r) = apply(
        &pre,
        &on_q(|session, queue| Request::Reap {
            session,
            queue,
            max_attempts: 5,
            limit: 10,
        }),
    );
    assert_eq!(r, Reply::Count(2));
    assert_eq!(s.jobs[&job_id(1)].set, Set::Pending);
    assert_eq!(s.jobs[&job_id(2)].set, Set::Dead);
    let (s, r) = apply(
        &pre,
        &on_q(|session, queue| Request::Promote {
            session,
            queue,
            limit: 10,
        }),
    );
    assert_eq!(r, Reply::Count(1));
    assert_eq!(s.jobs[&job_id(3)].set, Set::Pending);
    let retry = on_q(|session, queue| Request::Retry {
        session,
        queue,
        id: job_id(1),
        attempts: 1,
        backoff_ms: 0,
        max_attempts: 5,
    });
    let (s, r) = apply(&pre, &retry);
    assert_eq!(r, Reply::Retry(RetryOutcome::Delayed));
    // Re-sent retry answers stale, yet the job moved.
    let b = account(
        &pre,
        &[rec(
            retry.clone(),
            Outcome::Ok(Reply::Retry(RetryOutcome::Stale)),
        )],
        &s,
    );
    assert!(b.iter().any(|l| l.contains("answered stale")), "{b:?}");
    let (_, r) = apply(&s, &retry);
    assert_eq!(r, Reply::Retry(RetryOutcome::Stale));
}

#[test]
fn an_indeterminate_batch_may_have_made_any_prefix() {
    let pre = Snapshot::default();
    let call = on_q(|session, queue| Request::Batch {
        session,
        queue,
        n: 10,
        depth: 4,
        payload: "b1".into(),
        queues: None,
    });
    let mut s = pre.clone();
    for k in 0..=10 {
        assert!(
            account(&pre, &[rec(call.clone(), failed())], &s).is_empty(),
            "{k}"
        );
        enqueue(&mut s, "b1");
    }
    // 11 made: one too many, whether the batch failed or answered 10.
    for o in [failed(), Outcome::Ok(Reply::Count(10))] {
        let b = account(&pre, &[rec(call.clone(), o)], &s);
        assert!(b[0].contains("ran twice"), "{b:?}");
        assert!(b[0].contains("made 11 jobs carrying its token, at most 10 explainable; extra [\"j0000000000000011\"]"), "{b:?}");
    }
    // Acknowledged 10, made 9.
    let mut nine = pre.clone();
    for _ in 0..9 {
        enqueue(&mut nine, "b1");
    }
    let b = account(&pre, &[rec(call, Outcome::Ok(Reply::Count(10)))], &nine);
    assert!(
        b.iter()
            .any(|l| l.starts_with("lost: batch (test) was acknowledged with 10, but only 9")),
        "{b:?}"
    );
}

#[test]
fn a_job_with_no_caller_is_named() {
    let pre = Snapshot::default();
    let mut post = pre.clone();
    enqueue(&mut post, "nobody");
    let b = account(&pre, &[], &post);
    assert!(b.iter().any(|l| l.contains("made by no call")), "{b:?}");
}
