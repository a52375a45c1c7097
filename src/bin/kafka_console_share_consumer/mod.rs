//! Pieces of the `kafka-console-share-consumer` binary: argument parsing and the output
//! format of Java's DefaultMessageFormatter.

pub mod args;
pub mod format;
