//! Pieces of the `kafka-share-groups` binary: argument parsing and the two output formats.

pub mod args;
pub mod json;
pub mod text;
