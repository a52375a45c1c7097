//! Entry points into the decoders that are private to the crate, for the fuzz harness
//! (`tests/fuzz_decoders.rs`), which can only call what is public. Only with the
//! `unstable-internals` feature; no stability promise.

use bytes::Bytes;

use super::api::ApiRequest;
use super::compact;
use super::share_group_offsets::DescribeOffsetsRequest;
use super::CodecError;

/// Decodes a DescribeShareGroupOffsets response body (v0 or v1) with this crate's own codec,
/// as the admin client does.
pub fn describe_share_group_offsets(body: Bytes, version: i16) -> Result<(), CodecError> {
    DescribeOffsetsRequest::decode_response(body, version).map(drop)
}

/// Reads compact values from `data` in the order `ops` names them (one op per byte, taken
/// modulo the number of readers), until the ops or a reader run out: every reader of the
/// compact encoding, over any sequence of fields.
pub fn compact_values(ops: &[u8], mut data: Bytes) -> Result<(), CodecError> {
    const WHAT: &str = "fuzz";
    for &op in ops {
        let b = &mut data;
        match op % 11 {
            0 => {
                compact::get_i8(b, WHAT)?;
            }
            1 => {
                compact::get_i16(b, WHAT)?;
            }
            2 => {
                compact::get_i32(b, WHAT)?;
            }
            3 => {
                compact::get_i64(b, WHAT)?;
            }
            4 => {
                compact::get_bool(b, WHAT)?;
            }
            5 => {
                compact::get_uuid(b, WHAT)?;
            }
            6 => {
                compact::get_uvarint(b, WHAT)?;
            }
            7 => {
                compact::get_string(b, WHAT)?;
            }
            8 => {
                compact::get_nullable_string(b, WHAT)?;
            }
            9 => {
                compact::get_nullable_bytes(b, WHAT)?;
            }
            _ => {
                compact::get_array(b, WHAT, |r| {
                    let s = compact::get_nullable_string(r, WHAT)?;
                    compact::skip_tagged_fields(r, WHAT)?;
                    Ok(s)
                })?;
            }
        }
    }
    Ok(())
}
