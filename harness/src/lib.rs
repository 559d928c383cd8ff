//! The EchoMQ conformance harness: boots a pinned Valkey, drives any connector through one
//! trait, and judges it by the eight gates of `bundle/SPEC.md`.
#![forbid(unsafe_code)]

pub mod bundle;
pub mod connector;
pub mod engine;
pub mod error;
pub mod gate;
pub mod gates;
pub mod grammar;
pub mod keyspace;
pub mod observe;
