//! Batch compression codecs. The codecs themselves are the `kafka-protocol` crate's, which
//! write what the Java client writes (gzip stream, xerial-framed snappy, LZ4 frame, zstd
//! frame) and read xerial and raw snappy alike; this module adapts them to `CodecError` and
//! guards the one place where they would trust a length from the wire (snappy).

use std::fmt;
use std::str::FromStr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{self as kp, Compressor, Decompressor};

use crate::protocol::CodecError;

/// A record batch compression codec, named as in the Java client's `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Uncompressed.
    #[default]
    None,
    /// gzip (deflate in a gzip stream).
    Gzip,
    /// Snappy in xerial framing, as the Java client writes it.
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard frame format.
    Zstd,
}

impl Compression {
    /// Every codec, in attribute-id order.
    pub const ALL: [Compression; 5] =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    /// The codec id stored in bits 0-2 of the batch attributes.
    pub fn id(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The Java client's name: "none", "gzip", "snappy", "lz4" or "zstd".
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The codec named by a batch's attributes.
    pub fn from_attributes(attributes: i16) -> Result<Self, CodecError> {
        let id = attributes & 0x07;
        Compression::ALL.into_iter().find(|c| c.id() == id).ok_or_else(|| CodecError::Invalid {
            what: "record batch compression",
            detail: format!("unknown codec id {id}"),
        })
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = CodecError;

    /// Parses a Java `compression.type` name (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| CodecError::Invalid {
                what: "compression type",
                detail: format!("{s:?} (expected none, gzip, snappy, lz4 or zstd)"),
            })
    }
}

impl From<Compression> for kafka_protocol::records::Compression {
    fn from(c: Compression) -> Self {
        use kafka_protocol::records::Compression as K;
        match c {
            Compression::None => K::None,
            Compression::Gzip => K::Gzip,
            Compression::Snappy => K::Snappy,
            Compression::Lz4 => K::Lz4,
            Compression::Zstd => K::Zstd,
        }
    }
}

/// Maps a `kafka-protocol` codec error (an `anyhow::Error`, which this crate does not name).
fn crate_error<E: fmt::Display>(what: &'static str) -> impl FnOnce(E) -> CodecError {
    move |e| CodecError::Crate { what, detail: format!("{e:#}") }
}

/// Decompresses a batch's records section. The output is one buffer, so the records decoded
/// from it can still be zero-copy slices of it.
pub(crate) fn decompress(codec: Compression, mut data: Bytes) -> Result<Bytes, CodecError> {
    let src = &mut data;
    match codec {
        Compression::None => Ok(data),
        Compression::Gzip => {
            kp::Gzip::decompress(src, |out| Ok(std::mem::take(out))).map_err(crate_error("gzip records"))
        }
        Compression::Snappy => {
            check_snappy_lengths(src)?;
            kp::Snappy::decompress(src, |out| Ok(std::mem::take(out))).map_err(crate_error("snappy records"))
        }
        Compression::Lz4 => {
            check_lz4_frame_complete(src)?;
            kp::Lz4::decompress(src, |out| Ok(std::mem::take(out))).map_err(crate_error("lz4 records"))
        }
        Compression::Zstd => {
            kp::Zstd::decompress(src, |out| Ok(std::mem::take(out))).map_err(crate_error("zstd records"))
        }
    }
}

/// Compresses `records` (uncompressed records section) onto the end of `out`.
pub(crate) fn compress(codec: Compression, mut records: BytesMut, out: &mut BytesMut) -> Result<(), CodecError> {
    // The crate's compressors hand us their (empty) input buffer to fill: swapping ours in
    // avoids copying the records.
    let fill = |input: &mut BytesMut| {
        std::mem::swap(input, &mut records);
        Ok(())
    };
    match codec {
        Compression::None => {
            out.extend_from_slice(&records);
            Ok(())
        }
        Compression::Gzip => kp::Gzip::compress(out, fill).map_err(crate_error("gzip records")),
        Compression::Snappy => kp::Snappy::compress(out, fill).map_err(crate_error("snappy records")),
        Compression::Lz4 => kp::Lz4::compress(out, fill).map_err(crate_error("lz4 records")),
        Compression::Zstd => kp::Zstd::compress(out, fill).map_err(crate_error("zstd records")),
    }
}

/// xerial framing: magic, version 1, compatible version 1. Only this exact header selects the
/// framed path in the crate (anything else is read as raw snappy), so it is matched the same way.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// Snappy's densest op is a 3-byte copy emitting 64 bytes, so no valid block expands more
/// than 64/3 times.
const SNAPPY_MAX_EXPANSION: u64 = 22;

/// The crate allocates each snappy block's declared uncompressed length before decoding it;
/// refuse declarations no valid block could have, so a few corrupt bytes cannot request
/// gigabytes. Malformed framing is left for the crate to report.
fn check_snappy_lengths(data: &[u8]) -> Result<(), CodecError> {
    let Some(mut rest) = data.strip_prefix(XERIAL_HEADER.as_slice()) else {
        return check_snappy_block(data);
    };
    while rest.len() >= 4 {
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let Some(block) = rest[4..].get(..len) else {
            break;
        };
        check_snappy_block(block)?;
        rest = &rest[4 + len..];
    }
    Ok(())
}

fn check_snappy_block(block: &[u8]) -> Result<(), CodecError> {
    // The block starts with its uncompressed length as an unsigned LEB128 varint.
    let mut declared = 0u64;
    for (i, &b) in block.iter().take(5).enumerate() {
        declared |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            if declared > block.len() as u64 * SNAPPY_MAX_EXPANSION {
                return Err(CodecError::Invalid {
                    what: "snappy records",
                    detail: format!("block of {} bytes claims {declared} uncompressed bytes", block.len()),
                });
            }
            break;
        }
    }
    Ok(())
}

/// The lz4 crate's reader treats the end of its input as the end of the frame, so a frame cut
/// short would decode as whatever prefix it holds. Walk the frame's block sizes and insist on
/// the end mark (and the content checksum, if announced), as the Java client does.
fn check_lz4_frame_complete(data: &[u8]) -> Result<(), CodecError> {
    const MAGIC: [u8; 4] = 0x184D_2204u32.to_le_bytes();
    let truncated =
        || CodecError::Invalid { what: "lz4 records", detail: "frame truncated before its end mark".into() };
    let Some((&flg, rest)) = data.strip_prefix(&MAGIC[..]).and_then(|r| r.split_first()) else {
        return Err(CodecError::Invalid { what: "lz4 records", detail: "no lz4 frame magic".into() });
    };
    let block_checksum = if flg & 0x10 != 0 { 4 } else { 0 };
    let content_checksum = if flg & 0x04 != 0 { 4 } else { 0 };
    // BD byte, optional content size and dictionary id, header checksum byte.
    let header = 1 + if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 } + 1;
    let mut rest = rest.get(header..).ok_or_else(truncated)?;
    loop {
        let size = rest.get(..4).ok_or_else(truncated)?;
        let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]) & 0x7fff_ffff;
        if size == 0 {
            return match rest.len() >= 4 + content_checksum {
                true => Ok(()),
                false => Err(truncated()),
            };
        }
        let skip = 4 + size as usize + block_checksum;
        rest = rest.get(skip..).ok_or_else(truncated)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in Compression::ALL {
            assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
            assert_eq!(Compression::from_attributes(c.id() | 0x18).unwrap(), c);
        }
        assert_eq!("GZIP".parse::<Compression>().unwrap(), Compression::Gzip);
        assert!("brotli".parse::<Compression>().is_err());
        assert!(Compression::from_attributes(5).is_err());
    }

    #[test]
    fn every_codec_round_trips() {
        let input: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for c in Compression::ALL {
            let mut out = BytesMut::from(&b"hdr"[..]);
            compress(c, BytesMut::from(&input[..]), &mut out).unwrap();
            assert_eq!(&out[..3], b"hdr");
            let back = decompress(c, out.freeze().slice(3..)).unwrap();
            assert_eq!(back, input, "{c}");
        }
    }

    #[test]
    fn snappy_length_bombs_are_refused() {
        // Raw snappy claiming 4 GiB from 6 bytes.
        let raw = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        assert!(matches!(decompress(Compression::Snappy, raw), Err(CodecError::Invalid { .. })));
        let mut framed = XERIAL_HEADER.to_vec();
        framed.extend_from_slice(&6u32.to_be_bytes());
        framed.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        assert!(decompress(Compression::Snappy, framed.into()).is_err());
    }

    #[test]
    fn truncated_lz4_frames_are_refused() {
        let mut out = BytesMut::new();
        compress(Compression::Lz4, BytesMut::from(&[7u8; 1000][..]), &mut out).unwrap();
        let frame = out.freeze();
        assert!(decompress(Compression::Lz4, frame.clone()).is_ok());
        for cut in 0..frame.len() {
            assert!(decompress(Compression::Lz4, frame.slice(..cut)).is_err(), "{cut}");
        }
    }

    #[test]
    fn raw_snappy_is_read() {
        let input = b"raw snappy, as some non-Java producers write it".repeat(20);
        let raw = snap_raw(&input);
        assert_eq!(decompress(Compression::Snappy, raw).unwrap(), input);
    }

    /// Raw (unframed) snappy made of literal ops only: valid, and needs no encoder.
    fn snap_raw(input: &[u8]) -> Bytes {
        // Uncompressed length, then literal chunks of up to 60 bytes (tag = (len-1) << 2).
        let mut out = Vec::new();
        let mut n = input.len() as u64;
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        for chunk in input.chunks(60) {
            out.push(((chunk.len() - 1) as u8) << 2);
            out.extend_from_slice(chunk);
        }
        out.into()
    }
}
