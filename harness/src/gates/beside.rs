//! A part of a gate that mostly waits (a reply held past a connector's timeout), run beside the
//! gate's working parts instead of after them: issue #43's "waits that overlap". The part works
//! on the gate's second database ([`GateId::side_db`]) with a connector, session and proxy of its
//! own, and what the gate's other parts read is read per database (`CLIENT LIST`'s `db=`,
//! `MONITOR`'s `[db addr]`), so neither sees the other. What is engine-wide is not shared out by
//! database: the script cache (the part's connector loads scripts), the ACL LOG, the command
//! counters. So the part starts only once the parts that meet an empty cache are behind it
//! ([`Beside::start`]), ACL and TLS are judged for the gate as a whole as before, and no gate
//! that reads the counters (G2, G3, G5) has a part beside it. Its evidence goes where it stands
//! in the gate's order ([`GateOutcome::absorb`]): the record reads as if it had run in line.
//!
//! A part may also be *left* to the run ([`Reach::LaterGates`], [`Left`]): it goes on beside later
//! gates, the ones that share no engine-wide state with it (`gates/sequence.rs`), and its
//! verdict lands when it ends. Its `ACL LOG` entries name its database, so they come back to its
//! gate ([`super::acl::judge_part`]).
//!
//! Only where the engine has numbered databases of its own to give ([`Engine::has_databases`]:
//! not a cluster, not a `url` engine) and the part a proxy of its own (not behind Sentinel, where
//! the primary's proxy carries every session); elsewhere the part runs in line, where it stands,
//! on the gate's database, as before.
//!
//! [`Engine::has_databases`]: crate::engine::Engine::has_databases

use std::thread::{Scope, ScopedJoinHandle};

use crate::gates::{GateContext, GateError, GateId, GateOutcome};

/// A part: the gate's context, its evidence, and the database it runs on.
pub type Part = fn(&GateContext<'_>, &mut GateOutcome, u32) -> Result<(), GateError>;

/// What a part found, and how it ended.
pub type Ran = (GateOutcome, Result<(), GateError>);

/// A part its gate left to the run, and where its evidence goes in the gate's.
#[derive(Debug, Clone, Copy)]
pub struct Left {
    pub part: Part,
    pub at: usize,
}

/// The part: to run in line, ready to start beside the gate, or started.
pub enum Beside<'s, 'e, 'c> {
    InLine {
        ctx: &'e GateContext<'c>,
        id: GateId,
        part: Part,
    },
    Ready {
        scope: &'s Scope<'s, 'e>,
        ctx: &'e GateContext<'c>,
        id: GateId,
        part: Part,
    },
    Started {
        handle: ScopedJoinHandle<'s, Ran>,
        /// Where its evidence goes, once the gate reached it ([`Beside::here`]).
        at: Option<usize>,
    },
    /// Left to the run, to start beside later gates; `at` once the gate reached it.
    Leave { part: Part, at: Option<usize> },
}

/// Starts `part` of gate `id` on the gate's side database, in `scope`.
pub fn spawn<'s, 'e>(
    scope: &'s Scope<'s, 'e>,
    ctx: &'e GateContext<'_>,
    id: GateId,
    part: Part,
) -> ScopedJoinHandle<'s, Ran> {
    scope.spawn(move || {
        let mut side = GateOutcome::new(id, "");
        let db = id.side_db();
        let ended = ctx
            .engine
            .prepare_db(db)
            .map_err(GateError::from)
            .and_then(|_| part(ctx, &mut side, db));
        (side, ended)
    })
}

/// Takes what a left or side part found into its gate's outcome, at `at` (see
/// [`GateOutcome::absorb`]); a part that was left is judged on the `ACL LOG` and on plaintext at a
/// TLS front (R10.2) as its gate was.
pub fn take_in(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    at: usize,
    ran: std::thread::Result<Ran>,
    left: bool,
) {
    let (mut side, ended) = match ran {
        Ok(ran) => ran,
        // A part left to the run ended its gate's check long ago: its panic is its gate's ERROR.
        Err(p) if left => {
            out.error(format!(
                "the check panicked: {}",
                super::panic_text(p.as_ref())
            ));
            return;
        }
        // A panic in a part beside the gate is the gate's: `run_gate` turns it into ERROR.
        Err(p) => std::panic::resume_unwind(p),
    };
    out.figure("beside_waited_ms", side.waited.as_millis() as u64);
    if left {
        super::acl::judge_part(ctx, &mut side);
    }
    out.absorb(at, side, ended);
    // Its gate's TLS judgement, made before the part ended, is made again for what it sent.
    if left {
        super::judge_plaintext(ctx, out);
    }
}

/// Runs a part its gate left, now, in line (the gate ran alone, not in a whole run).
pub fn run_left(ctx: &GateContext<'_>, out: &mut GateOutcome, left: Left) {
    let ran = std::thread::scope(|scope| spawn(scope, ctx, out.id, left.part).join());
    take_in(ctx, out, left.at, ran, true);
}

impl<'s, 'e, 'c> Beside<'s, 'e, 'c> {
    /// Starts the part beside the gate, where it has a database of its own. The gate calls it
    /// once its parts that depend on the engine-wide state the part changes (the script cache:
    /// a part's connector loads the scripts) are behind it, so what they meet is the same as
    /// when the part ran after them.
    pub fn start(&mut self) {
        if let Beside::Ready {
            scope,
            ctx,
            id,
            part,
        } = *self
        {
            let handle = spawn(scope, ctx, id, part);
            *self = Beside::Started { handle, at: None };
        }
    }

    /// Where the part stands in the gate's order: in line (or never started), it runs now on
    /// the gate's database, and its error ends the gate's parts as any part's does; started,
    /// its evidence will go here.
    pub fn here(&mut self, out: &mut GateOutcome) -> Result<(), GateError> {
        match self {
            Beside::InLine { ctx, id, part } | Beside::Ready { ctx, id, part, .. } => {
                part(ctx, out, ctx.db_of(*id))
            }
            Beside::Started { at, .. } | Beside::Leave { at, .. } => {
                *at = Some(out.evidence.len());
                Ok(())
            }
        }
    }
}

/// How far a part goes on beside other work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Beside its gate's other parts: started by [`Beside::start`], waited for at the gate's end.
    Gate,
    /// Left to the run, beside later gates (`gates/sequence.rs`): [`Beside::here`] marks where
    /// its evidence goes and the gate's outcome carries it ([`GateOutcome::left`]), for the run
    /// to start later or for [`super::run_gate`] to run at once.
    LaterGates,
}

/// Runs `body` (the gate's parts, in order) with `part` beside them, as far as `reach` says,
/// where the engine has a database to give; elsewhere the part runs in line where it stands.
/// `body` calls [`Beside::start`] when the part may begin and [`Beside::here`] where it stands.
/// A part the gate never reached (it stopped early) is dropped, as in line it would not have
/// run (one already started is waited for). The gate's wait for a part beside it counts as
/// waiting.
pub fn with_part<'c>(
    ctx: &GateContext<'c>,
    id: GateId,
    out: &mut GateOutcome,
    part: Part,
    reach: Reach,
    body: impl FnOnce(&mut GateOutcome, &mut Beside<'_, '_, 'c>) -> Result<(), GateError>,
) -> Result<(), GateError> {
    // Behind Sentinel the part's proxy is the primary's own, which every other part's traffic
    // crosses too: a rule it arms could fire on another part's command. So it runs in line.
    if !ctx.engine.has_databases() || ctx.engine.kind == crate::engine::EngineKind::Sentinel {
        return body(out, &mut Beside::InLine { ctx, id, part });
    }
    if reach == Reach::LaterGates {
        let mut beside = Beside::Leave { part, at: None };
        let ended = body(out, &mut beside);
        if let Beside::Leave { part, at: Some(at) } = beside {
            out.left = Some(Left { part, at });
        }
        return ended;
    }
    std::thread::scope(|scope| {
        let mut beside = Beside::Ready {
            scope,
            ctx,
            id,
            part,
        };
        let ended = body(out, &mut beside);
        let Beside::Started { handle, at } = beside else {
            return ended;
        };
        let ran = out.waiting(|| handle.join());
        if let Some(at) = at {
            take_in(ctx, out, at, ran, false);
        }
        ended
    })
}
