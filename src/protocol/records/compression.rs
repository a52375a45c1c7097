//! Batch compression codecs: gzip stream, xerial-framed snappy (raw snappy read too), LZ4
//! frame and zstd frame, as the Java client writes them. Compression is the `kafka-protocol`
//! crate's. Decompression drives the same codec crates' streaming decoders into a
//! [`BoundedOutput`], so a small hostile batch that would inflate to gigabytes stops at the
//! caller's limit with [`CodecError::DecompressedTooLarge`] instead of exhausting memory (the
//! crate's helpers inflate without any limit).

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{self as kp, Compressor};

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

/// Decompresses a batch's records section into at most `limit` bytes. The output is one
/// buffer, so the records decoded from it can still be zero-copy slices of it.
///
/// Each codec reads the same inputs the `kafka-protocol` crate's decompressors read (the
/// decoders are the same crates' and are driven the same way); only the output is bounded.
pub(crate) fn decompress(codec: Compression, data: Bytes, limit: usize) -> Result<Bytes, CodecError> {
    if codec == Compression::None {
        return Ok(data);
    }
    let mut out = BoundedOutput::new(codec, limit, data.len());
    let result = match codec {
        Compression::None => Ok(()),
        Compression::Gzip => gunzip(&data, &mut out),
        Compression::Snappy => unsnappy(&data, &mut out),
        Compression::Lz4 => check_lz4_frame_complete(&data).and_then(|()| unlz4(&data, &mut out)),
        Compression::Zstd => unzstd(&data, &mut out),
    };
    // A codec error caused by the output refusing more bytes is the limit, whatever the codec
    // made of it.
    match (result, out.overflowed) {
        (_, true) => Err(CodecError::DecompressedTooLarge { codec, limit }),
        (Err(e), false) => Err(e),
        (Ok(()), false) => Ok(Bytes::from(out.buf)),
    }
}

/// Where the decoders write: a buffer that refuses to grow past `limit`, and grows in steps
/// that never reserve past it either (`Vec`'s own doubling could reserve twice the limit).
struct BoundedOutput {
    codec: Compression,
    buf: Vec<u8>,
    limit: usize,
    /// Set when a write would have passed the limit: the decoder's error is then ours.
    overflowed: bool,
}

impl BoundedOutput {
    /// First reservation: four times the compressed size (Kafka batches rarely compress
    /// better), within the limit.
    fn new(codec: Compression, limit: usize, compressed: usize) -> Self {
        let initial = compressed.saturating_mul(4).min(limit);
        BoundedOutput { codec, buf: Vec::with_capacity(initial), limit, overflowed: false }
    }

    /// Makes room for `extra` more bytes, or marks the output overflowed.
    fn reserve(&mut self, extra: usize) -> io::Result<()> {
        let needed = self.buf.len().checked_add(extra).filter(|&n| n <= self.limit);
        let Some(needed) = needed else {
            self.overflowed = true;
            return Err(io::Error::other(format!("{} output past its limit of {} bytes", self.codec, self.limit)));
        };
        if needed > self.buf.capacity() {
            let target = needed.max(self.buf.capacity().saturating_mul(2)).min(self.limit);
            self.buf.reserve_exact(target - self.buf.len());
        }
        Ok(())
    }

    /// Appends `n` zero bytes (for decoders that fill a slice) and returns them.
    fn grow_zeroed(&mut self, n: usize) -> io::Result<&mut [u8]> {
        self.reserve(n)?;
        let start = self.buf.len();
        self.buf.resize(start + n, 0);
        Ok(&mut self.buf[start..])
    }
}

impl Write for BoundedOutput {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.reserve(data.len())?;
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A codec's own error, with the codec's name as the crate's helpers reported it.
fn codec_error(what: &'static str) -> impl FnOnce(io::Error) -> CodecError {
    move |e| CodecError::Crate { what, detail: e.to_string() }
}

/// One gzip member, through the write-side decoder the crate uses: it takes the whole input
/// and reports bytes past the member's end, and a member cut short at `finish`.
fn gunzip(data: &[u8], out: &mut BoundedOutput) -> Result<(), CodecError> {
    let mut decoder = flate2::write::GzDecoder::new(out);
    decoder.write_all(data).and_then(|()| decoder.try_finish()).map_err(codec_error("gzip records"))
}

/// Raw snappy, or xerial framing (the exact 16-byte header, then blocks each preceded by its
/// big-endian u32 length), as the crate and the Java client read them.
fn unsnappy(data: &[u8], out: &mut BoundedOutput) -> Result<(), CodecError> {
    const WHAT: &str = "snappy records";
    let invalid = |detail: &str| CodecError::Invalid { what: WHAT, detail: detail.to_string() };
    if data.is_empty() {
        return Err(invalid("no bytes in the snappy stream"));
    }
    // Refuses declared lengths no block could have before any of them is allocated.
    check_snappy_lengths(data)?;
    let Some(mut rest) = data.strip_prefix(XERIAL_HEADER.as_slice()) else {
        return snappy_block(data, out);
    };
    while !rest.is_empty() {
        let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(|| invalid("block length cut short"))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail.get(..len).ok_or_else(|| invalid("block cut short"))?;
        snappy_block(block, out)?;
        rest = &tail[len..];
    }
    Ok(())
}

/// One raw snappy block, appended to `out`: its declared length is reserved (within the
/// limit) and filled.
fn snappy_block(block: &[u8], out: &mut BoundedOutput) -> Result<(), CodecError> {
    let snap_error = |e: snap::Error| CodecError::Crate { what: "snappy records", detail: e.to_string() };
    let len = snap::raw::decompress_len(block).map_err(snap_error)?;
    let target = out.grow_zeroed(len).map_err(codec_error("snappy records"))?;
    snap::raw::Decoder::new().decompress(block, target).map_err(snap_error)?;
    Ok(())
}

/// The LZ4 frame (the caller checked it is complete), read to its end.
fn unlz4(data: &[u8], out: &mut BoundedOutput) -> Result<(), CodecError> {
    let mut decoder = lz4::Decoder::new(data).map_err(codec_error("lz4 records"))?;
    io::copy(&mut decoder, out).map(drop).map_err(codec_error("lz4 records"))
}

/// Every zstd frame of the input, as the crate reads it (a cut frame is an error).
fn unzstd(data: &[u8], out: &mut BoundedOutput) -> Result<(), CodecError> {
    zstd::stream::copy_decode(data, out).map_err(codec_error("zstd records"))
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

    /// A limit none of the ordinary tests come near.
    const LIMIT: usize = 1 << 30;

    fn compressed(c: Compression, input: &[u8]) -> Bytes {
        let mut out = BytesMut::new();
        compress(c, BytesMut::from(input), &mut out).unwrap();
        out.freeze()
    }

    /// Every codec: a batch that inflates to exactly the limit is read; one byte more is the
    /// typed error, whether the bytes are zeros (a bomb's favourite) or varied.
    #[test]
    fn inflating_past_the_limit_is_a_typed_error_at_every_codec() {
        let limit = 300_000;
        let varied: Vec<u8> = (0..limit as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for input in [vec![0u8; limit], varied] {
            for c in Compression::ALL.into_iter().filter(|&c| c != Compression::None) {
                let at_limit = compressed(c, &input);
                assert_eq!(decompress(c, at_limit, limit).unwrap(), input, "{c}");
                let mut over = input.clone();
                over.push(1);
                match decompress(c, compressed(c, &over), limit) {
                    Err(CodecError::DecompressedTooLarge { codec, limit: l }) => assert_eq!((codec, l), (c, limit)),
                    other => panic!("{c}: expected DecompressedTooLarge, got {other:?}"),
                }
            }
        }
    }

    /// A bomb (a few KB inflating to 16 MiB) stops at a small limit, with a message saying
    /// what to do.
    #[test]
    fn bombs_stop_at_the_limit() {
        let zeros = vec![0u8; 16 << 20];
        for c in [Compression::Gzip, Compression::Zstd, Compression::Lz4, Compression::Snappy] {
            let bomb = compressed(c, &zeros);
            let err = decompress(c, bomb, 1 << 20).unwrap_err();
            assert!(matches!(err, CodecError::DecompressedTooLarge { .. }), "{c}: {err}");
            assert!(err.to_string().contains("fetch.max.bytes"), "{err}");
        }
    }

    /// The output never reserves past the limit, however it grows.
    #[test]
    fn the_output_never_reserves_past_its_limit() {
        let mut out = BoundedOutput::new(Compression::Zstd, 10_000, 10);
        for _ in 0..99 {
            out.write_all(&[1; 101]).unwrap();
            assert!(out.buf.capacity() <= 10_000);
        }
        assert!(out.write_all(&[1; 101]).is_err());
        assert!(out.overflowed && out.buf.capacity() <= 10_000);
    }

    /// What the crate's decompressors (behind the same pre-checks) made of an input, as this
    /// module did before it bounded the output.
    fn crate_decompress(codec: Compression, data: &[u8]) -> Result<Bytes, ()> {
        use kafka_protocol::compression::Decompressor;
        let src = &mut Bytes::copy_from_slice(data);
        let take = |out: &mut Bytes| Ok(std::mem::take(out));
        match codec {
            Compression::None => Ok(src.clone()),
            Compression::Gzip => kp::Gzip::decompress(src, take).map_err(drop),
            Compression::Snappy => {
                check_snappy_lengths(src).map_err(drop)?;
                kp::Snappy::decompress(src, take).map_err(drop)
            }
            Compression::Lz4 => {
                check_lz4_frame_complete(src).map_err(drop)?;
                kp::Lz4::decompress(src, take).map_err(drop)
            }
            Compression::Zstd => kp::Zstd::decompress(src, take).map_err(drop),
        }
    }

    /// The bounded decoders accept exactly what the crate's accept, with the same output:
    /// valid streams, and every truncation and byte change of them (and raw snappy).
    #[test]
    fn bounded_decoders_agree_with_the_crate() {
        let input: Vec<u8> = (0..3000u32).map(|i| (i % 7) as u8 * (i % 13) as u8).collect();
        let mut cases: Vec<(Compression, Vec<u8>)> = vec![(Compression::Snappy, snap_raw(&input).to_vec())];
        for c in Compression::ALL {
            cases.push((c, compressed(c, &input).to_vec()));
            let mut two = compressed(c, &input[..100]).to_vec();
            two.extend_from_slice(&compressed(c, &input[100..200]));
            cases.push((c, two));
            cases.push((c, Vec::new()));
        }
        for (c, valid) in cases {
            let mut variants = vec![valid.clone()];
            variants.extend((0..valid.len()).map(|cut| valid[..cut].to_vec()));
            for at in 0..valid.len() {
                for flip in [0x01, 0x80] {
                    let mut v = valid.clone();
                    v[at] ^= flip;
                    variants.push(v);
                }
            }
            for v in variants {
                let ours = decompress(c, Bytes::from(v.clone()), LIMIT).map_err(drop);
                assert_eq!(ours, crate_decompress(c, &v), "{c}: {}", v.len());
            }
        }
    }

    /// Raw snappy declaring more than the limit is refused before anything is reserved.
    #[test]
    fn raw_snappy_declaring_more_than_the_limit_is_refused() {
        let raw = snap_raw(&[5u8; 5000]);
        assert!(decompress(Compression::Snappy, raw.clone(), 5000).is_ok());
        assert!(matches!(
            decompress(Compression::Snappy, raw, 4999),
            Err(CodecError::DecompressedTooLarge { codec: Compression::Snappy, limit: 4999 })
        ));
    }

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
            let back = decompress(c, out.freeze().slice(3..), LIMIT).unwrap();
            assert_eq!(back, input, "{c}");
        }
    }

    #[test]
    fn snappy_length_bombs_are_refused() {
        // Raw snappy claiming 4 GiB from 6 bytes.
        let raw = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        assert!(matches!(decompress(Compression::Snappy, raw, LIMIT), Err(CodecError::Invalid { .. })));
        let mut framed = XERIAL_HEADER.to_vec();
        framed.extend_from_slice(&6u32.to_be_bytes());
        framed.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]);
        assert!(decompress(Compression::Snappy, framed.into(), LIMIT).is_err());
    }

    #[test]
    fn truncated_lz4_frames_are_refused() {
        let mut out = BytesMut::new();
        compress(Compression::Lz4, BytesMut::from(&[7u8; 1000][..]), &mut out).unwrap();
        let frame = out.freeze();
        assert!(decompress(Compression::Lz4, frame.clone(), LIMIT).is_ok());
        for cut in 0..frame.len() {
            assert!(decompress(Compression::Lz4, frame.slice(..cut), LIMIT).is_err(), "{cut}");
        }
    }

    #[test]
    fn raw_snappy_is_read() {
        let input = b"raw snappy, as some non-Java producers write it".repeat(20);
        let raw = snap_raw(&input);
        assert_eq!(decompress(Compression::Snappy, raw, LIMIT).unwrap(), input);
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
