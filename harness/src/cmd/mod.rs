//! The commands of `emq-gate`, on top: they compose the layers below and nothing imports them.

pub mod bench;
pub mod bench_spread;
pub mod bench_stats;
pub mod bench_text;
pub mod bench_valkey;
pub mod cases;
pub mod cli;
pub mod diff;
pub mod finish;
pub mod matrix;
pub mod preflight;
pub mod record;
pub mod reproduce;
pub mod rerun;
pub mod run;
pub mod smoke;
pub mod sources;
pub mod summary;
