//! The eight gates in order (DESIGN §7).

pub mod g1_fence;
pub mod g7_interleavings;
use crate::gate::{Gate, not_built};

/// G1–G8, in the order the record lists them.
pub const ALL: [Gate; 8] = [
    Gate { id: "G1", name: "fence", run: g1_fence::check },
    Gate { id: "G2", name: "sha1", run: not_built },
    Gate { id: "G3", name: "evalsha-first", run: not_built },
    Gate { id: "G4", name: "declared-keys", run: not_built },
    Gate { id: "G5", name: "pipeline", run: not_built },
    Gate { id: "G6", name: "cases", run: not_built },
    Gate { id: "G7", name: "interleavings", run: g7_interleavings::check },
    Gate { id: "G8", name: "atomicity", run: not_built },
];
