//! The eight gates in order (DESIGN §7).

pub mod g1_fence;
pub mod g2_sha1;
pub mod g3_evalsha;
pub mod g4_keys;
pub mod g5_pipeline;
pub mod g6_cases;
pub mod g7_interleavings;
pub mod g8_atomicity;

use crate::gate::Gate;

/// G1–G8, in the order the record lists them.
pub const ALL: [Gate; 8] = [
    Gate {
        id: "G1",
        name: "fence",
        run: g1_fence::check,
    },
    Gate {
        id: "G2",
        name: "sha1",
        run: g2_sha1::check,
    },
    Gate {
        id: "G3",
        name: "evalsha-first",
        run: g3_evalsha::check,
    },
    Gate {
        id: "G4",
        name: "declared-keys",
        run: g4_keys::check,
    },
    Gate {
        id: "G5",
        name: "pipeline",
        run: g5_pipeline::check,
    },
    Gate {
        id: "G6",
        name: "cases",
        run: g6_cases::check,
    },
    Gate {
        id: "G7",
        name: "interleavings",
        run: g7_interleavings::check,
    },
    Gate {
        id: "G8",
        name: "atomicity",
        run: g8_atomicity::check,
    },
];
