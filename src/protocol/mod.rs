//! The pure wire codec: no IO, no clock, no tasks.
//!
//! Everything in here turns bytes into values and values into bytes. The layers above
//! (connection, cluster, share state machines) never touch raw bytes except through it.

use thiserror::Error;

pub mod api;
pub mod bounded;
pub(crate) mod compact;
pub mod frame;
pub mod records;
pub mod share;
pub(crate) mod share_group_offsets;
// The crate-private decoders, reachable by the fuzz harness.
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod private_decoders;

/// A failure to encode or decode a message. Carries enough context to say which message and
/// which field went wrong; never produced by a panic.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    /// The buffer ended before the message did.
    #[error("truncated {what}: needed {needed} more bytes, {remaining} left")]
    Truncated {
        /// What was being decoded (message or field name).
        what: &'static str,
        /// Bytes still needed.
        needed: usize,
        /// Bytes left in the buffer.
        remaining: usize,
    },
    /// A field held a value the protocol does not allow.
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// What was being decoded (message or field name).
        what: &'static str,
        /// Why it is invalid.
        detail: String,
    },
    /// A record batch failed its CRC-32C check.
    #[error("record batch at base offset {base_offset} failed its CRC check (stored {stored:#010x}, computed {computed:#010x})")]
    CrcMismatch {
        /// The batch's base offset.
        base_offset: i64,
        /// The CRC stored in the batch header.
        stored: u32,
        /// The CRC computed over the batch.
        computed: u32,
    },
    /// The message or version is not one this codec knows.
    #[error("unsupported {what} version {version}")]
    UnsupportedVersion {
        /// The message name.
        what: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// Bytes left over after a complete message was decoded.
    #[error("{what}: {extra} bytes left over after decoding")]
    TrailingBytes {
        /// The message name.
        what: &'static str,
        /// How many bytes were not consumed.
        extra: usize,
    },
    /// A compressed record batch inflates past the limit on a decompressed batch (for a share
    /// consumer, `fetch.max.bytes`, at least 16 MiB): refused before it could exhaust memory.
    #[error(
        "{codec} record batch inflates past the limit of {limit} bytes on a decompressed batch; \
         if batches that large are expected, raise the consumer's fetch.max.bytes above that"
    )]
    DecompressedTooLarge {
        /// The batch's compression codec.
        codec: records::Compression,
        /// The limit, in decompressed bytes.
        limit: usize,
    },
    /// An error reported by the `kafka-protocol` crate while encoding or decoding.
    #[error("{what}: {detail}")]
    Crate {
        /// The message name.
        what: &'static str,
        /// The crate's error text.
        detail: String,
    },
}
