//! The final comparison of G7, pure: the model's queues against the engine's keyspace, every
//! time score judged exactly against the engine-`TIME` bracket of the call that wrote it.

use std::collections::BTreeMap;

use crate::protocol::grammar::Set;
use crate::protocol::keyspace::{Keyspace, QueueState};
use crate::suites::model::state::{Model, Queue, Stamp, ordered};

/// The engine-time bracket of one call that wrote a time score: `TIME` (ms, the scripts' formula)
/// read by the harness just before the call and just after its reply, so the script's `now` lies
/// in `[before, after]` and every score it wrote with `ms` in `[before + ms, after + ms]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTime {
    pub before: i64,
    pub after: i64,
    /// 1-based step of the history.
    pub step: usize,
    /// The request, as JSON.
    pub call: String,
}

/// The brackets of one history's time-writing calls, by the model's tick.
#[derive(Debug, Clone, Default)]
pub struct Timing {
    pub calls: BTreeMap<u64, CallTime>,
    /// The widest bracket, ms.
    pub widest_ms: i64,
    /// The earliest engine time a positive lease, backoff or delay written so far could come due.
    pub(crate) earliest_due: Option<i64>,
}

/// Why `score`, written with `stamp`, is not the engine time of the call that wrote it plus the
/// stamp's ms (`None` when it is, exactly).
fn judge_score(score: i64, stamp: Stamp, timing: &Timing) -> Option<String> {
    let Some(c) = timing.calls.get(&stamp.tick) else {
        return Some(format!(
            "score {score}, but no bracket was read for the call that wrote it (tick {})",
            stamp.tick
        ));
    };
    let (lo, hi) = (c.before + stamp.ms, c.after + stamp.ms);
    if (lo..=hi).contains(&score) {
        return None;
    }
    let off = if score < lo {
        format!("{} ms early", lo - score)
    } else {
        format!("{} ms late", score - hi)
    };
    Some(format!(
        "score {score}, but step {} {} ran at engine ms [{}, {}] ({} ms wide), so now+{} wants \
         [{lo}, {hi}]: {off}",
        c.step,
        c.call,
        c.before,
        c.after,
        c.after - c.before,
        stamp.ms
    ))
}

/// Every difference between the model's state and the engine's keyspace. Each active, delayed and
/// dead score must be exactly the engine time of the call that wrote it (within its bracket in
/// `timing`) plus its lease, backoff or delay.
pub fn diff_keyspace(model: &Model, ks: &Keyspace, timing: &Timing) -> Vec<String> {
    let mut out: Vec<String> = ks
        .foreign
        .iter()
        .map(|k| format!("key outside the grammar: {k}"))
        .collect();
    let empty_model = Queue::default();
    let empty_ks = QueueState::default();
    let mut names: Vec<&String> = model
        .queues
        .iter()
        .filter(|(_, q)| !q.is_empty())
        .map(|(k, _)| k)
        .chain(ks.queues.keys())
        .collect();
    names.sort();
    names.dedup();
    for q in names {
        let m = model.queues.get(q).unwrap_or(&empty_model);
        let k = ks.queues.get(q).unwrap_or(&empty_ks);
        for set in Set::ALL {
            diff_set(&mut out, q, set, m, k, timing);
        }
        diff_jobs(&mut out, q, m, k);
        if m.seq != k.seq {
            out.push(format!("{q} seq: model {:?}, engine {:?}", m.seq, k.seq));
        }
    }
    out
}

/// One set of queue `q`: its members in order, then each member's score against its stamp.
fn diff_set(out: &mut Vec<String>, q: &str, set: Set, m: &Queue, k: &QueueState, timing: &Timing) {
    let got: Vec<&String> = k.set(set).iter().map(|(id, _)| id).collect();
    let want = m.ids(set);
    if got
        .iter()
        .map(|s| s.as_str())
        .ne(want.iter().map(String::as_str))
    {
        out.push(format!("{q} {set}: model {want:?}, engine {got:?}"));
        return;
    }
    let stamps: Vec<(String, Option<Stamp>)> = match set {
        Set::Pending => want.iter().map(|id| (id.clone(), None)).collect(),
        Set::Active => ordered(&m.active)
            .into_iter()
            .map(|(a, s)| (a, Some(s)))
            .collect(),
        Set::Delayed => ordered(&m.delayed)
            .into_iter()
            .map(|(a, s)| (a, Some(s)))
            .collect(),
        Set::Dead => ordered(&m.dead)
            .into_iter()
            .map(|(a, s)| (a, Some(s)))
            .collect(),
    };
    for ((id, score), (_, stamp)) in k.set(set).iter().zip(stamps) {
        match stamp {
            None if *score != 0 => out.push(format!("{q} pending {id}: score {score}, not 0")),
            Some(s) => {
                if let Some(why) = judge_score(*score, s, timing) {
                    out.push(format!("{q} {set} {id}: {why}"));
                }
            }
            None => {}
        }
    }
}

/// Queue `q`'s job hashes, field by field; `out` is deduplicated whole, as it always was.
fn diff_jobs(out: &mut Vec<String>, q: &str, m: &Queue, k: &QueueState) {
    let want_jobs: BTreeMap<String, BTreeMap<String, String>> = m
        .jobs
        .iter()
        .map(|(id, j)| {
            (
                id.clone(),
                [
                    ("payload".to_string(), j.payload.clone()),
                    ("attempts".to_string(), j.attempts.to_string()),
                    ("state".to_string(), j.state.to_string()),
                ]
                .into_iter()
                .collect(),
            )
        })
        .collect();
    if want_jobs != k.jobs {
        for id in want_jobs.keys().chain(k.jobs.keys()) {
            let (a, b) = (want_jobs.get(id), k.jobs.get(id));
            if a != b {
                out.push(format!("{q} job {id}: model {a:?}, engine {b:?}"));
            }
        }
        out.dedup();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One bracketed claim at tick 7, `[1000, 1002]`; the runner's tests use it too.
    pub(crate) fn timing() -> Timing {
        let mut t = Timing::default();
        t.calls.insert(
            7,
            CallTime {
                before: 1_000,
                after: 1_002,
                step: 3,
                call: r#"{"cmd":"claim"}"#.into(),
            },
        );
        t
    }

    #[test]
    fn scores_are_judged_by_the_bracket_of_the_call_that_wrote_them() {
        let t = timing();
        let s = Stamp { ms: 750, tick: 7 };
        assert_eq!(judge_score(1_750, s, &t), None);
        assert_eq!(judge_score(1_752, s, &t), None);
        let late = judge_score(1_753, s, &t).unwrap();
        assert!(
            late.contains(r#"step 3 {"cmd":"claim"} ran at engine ms [1000, 1002] (2 ms wide)"#),
            "{late}"
        );
        assert!(
            late.ends_with("now+750 wants [1750, 1752]: 1 ms late"),
            "{late}"
        );
        let early = judge_score(1_749, s, &t).unwrap();
        assert!(early.ends_with("1 ms early"), "{early}");
        assert!(judge_score(1_000, Stamp { ms: 0, tick: 8 }, &t).is_some());
    }
}
