//! G7's machinery: a pure reference model of EchoMQ, abstract histories with their proptest
//! strategies, the runner that judges a connector by the model, the YAML case a failure becomes,
//! the concurrent soak. (Broken connectors live in `crate::doubles`.)

pub mod case;
pub mod diff;
pub mod history;
pub mod judge;
pub mod runner;
pub mod shrink;
pub mod soak;
pub mod state;
