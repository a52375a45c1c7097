//! Pieces of the `kafka-share-groups` binary: argument parsing, the two output formats, and
//! the CSV reset plans of `--export` / `--from-file`.

pub mod args;
pub mod errors;
pub mod json;
pub mod reset_plan;
pub mod text;
