//! The fuzz harness behind `tests/fuzz_decoders.rs`: seeded inputs, a panic catcher and an
//! allocation bound per input.

pub mod alloc;
pub mod corpus;
pub mod mutate;
pub mod targets;
