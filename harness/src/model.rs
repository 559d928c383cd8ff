//! G7's machinery: a pure reference model of EchoMQ, abstract histories with their proptest
//! strategies, the runner that judges a connector by the model, the YAML case a failure becomes,
//! the concurrent soak, and deliberately broken connectors for self-tests.

pub mod case;
pub mod doubles;
pub mod history;
pub mod runner;
pub mod soak;
pub mod state;
