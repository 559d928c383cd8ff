//! G6: the declarative YAML cases of `cases/` — their format, the runner, and `--bless`.

pub mod bless;
pub mod expect;
pub mod format;
pub mod harness;
pub mod runner;
