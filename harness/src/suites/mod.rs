//! What a connector is replayed against: the declarative YAML cases (G6) and the model-checked
//! interleavings (G7).

pub mod cases;
pub mod model;
