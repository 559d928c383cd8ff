//! The commands of `emq-gate`, on top: they compose the layers below and nothing imports them.

pub mod bench;
pub mod cli;
pub mod matrix;
pub mod run;
pub mod smoke;
pub mod summary;
