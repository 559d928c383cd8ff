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
//! Only where the engine has numbered databases of its own to give ([`Engine::has_databases`]:
//! not a cluster, not a `url` engine); elsewhere the part runs in line, where it stands, on the
//! gate's database, as before.
//!
//! [`Engine::has_databases`]: crate::engine::Engine::has_databases

use std::thread::{Scope, ScopedJoinHandle};

use crate::gates::{GateContext, GateError, GateId, GateOutcome};

/// A part: the gate's context, its evidence, and the database it runs on.
pub type Part = fn(&GateContext<'_>, &mut GateOutcome, u32) -> Result<(), GateError>;

type Ran = (GateOutcome, Result<(), GateError>);

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
            let handle = scope.spawn(move || {
                let mut side = GateOutcome::new(id, "");
                let db = id.side_db();
                let ended = ctx
                    .engine
                    .prepare_db(db)
                    .map_err(GateError::from)
                    .and_then(|_| part(ctx, &mut side, db));
                (side, ended)
            });
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
            Beside::Started { at, .. } => {
                *at = Some(out.evidence.len());
                Ok(())
            }
        }
    }
}

/// Runs `body` (the gate's parts, in order) with `part` ready to start beside them where the
/// engine has a database to give; `body` calls [`Beside::start`] when the part may begin and
/// [`Beside::here`] where it stands. A part the gate never reached (it stopped early) is waited
/// for and its evidence dropped, as in line it would not have run. The gate's wait for the part
/// to end counts as waiting.
pub fn with_part<'c>(
    ctx: &GateContext<'c>,
    id: GateId,
    out: &mut GateOutcome,
    part: Part,
    body: impl FnOnce(&mut GateOutcome, &mut Beside<'_, '_, 'c>) -> Result<(), GateError>,
) -> Result<(), GateError> {
    if !ctx.engine.has_databases() {
        return body(out, &mut Beside::InLine { ctx, id, part });
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
        let (side, side_ended) = match out.waiting(|| handle.join()) {
            Ok(ran) => ran,
            // A panic in the part is the gate's: `run_gate` turns it into ERROR.
            Err(p) => std::panic::resume_unwind(p),
        };
        out.figure("beside_waited_ms", side.waited.as_millis() as u64);
        if let Some(at) = at {
            out.absorb(at, side, side_ended);
        }
        ended
    })
}
