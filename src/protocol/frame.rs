//! Request and response headers, by hand: they are tiny, fixed, and on every request.
//!
//! Request header v1: api_key i16, api_version i16, correlation_id i32, client_id (nullable
//! i16-length string). v2 adds an empty tagged-field section. Response header v0 is the
//! correlation id; v1 adds a tagged-field section, which we skip.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::compact::{get_uvarint_with, Overflow};
use super::CodecError;

/// Writes a request header at `header_version` (1 or 2).
pub fn encode_request_header(
    buf: &mut BytesMut,
    api_key: i16,
    api_version: i16,
    header_version: i16,
    correlation_id: i32,
    client_id: &str,
) {
    buf.put_i16(api_key);
    buf.put_i16(api_version);
    buf.put_i32(correlation_id);
    if header_version >= 1 {
        // client_id stays a classic (non-compact) nullable string even in header v2.
        let id = &client_id.as_bytes()[..client_id.len().min(i16::MAX as usize)];
        buf.put_i16(id.len() as i16);
        buf.put_slice(id);
    }
    if header_version >= 2 {
        buf.put_u8(0); // no tagged fields
    }
}

/// Reads the correlation id at the start of a response frame without consuming it.
pub fn peek_correlation_id(frame: &[u8]) -> Result<i32, CodecError> {
    match frame.get(..4) {
        Some(b) => Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(CodecError::Truncated { what: "response header", needed: 4, remaining: frame.len() }),
    }
}

/// Strips the response header (`header_version` 0 or 1) and returns the body.
pub fn strip_response_header(mut frame: Bytes, header_version: i16) -> Result<Bytes, CodecError> {
    if frame.remaining() < 4 {
        return Err(CodecError::Truncated { what: "response header", needed: 4, remaining: frame.remaining() });
    }
    frame.advance(4);
    if header_version >= 1 {
        skip_tagged_fields(&mut frame, "response header")?;
    }
    Ok(frame)
}

/// Reads an unsigned varint (at most 5 bytes), as Java's `ByteUtils.readUnsignedVarint` does
/// (bits past 32 dropped).
pub fn read_uvarint(buf: &mut Bytes, what: &'static str) -> Result<u32, CodecError> {
    get_uvarint_with(buf, what, Overflow::DropBits)
}

/// Skips a tagged-field section: a count, then (tag, size, bytes) for each.
pub fn skip_tagged_fields(buf: &mut Bytes, what: &'static str) -> Result<(), CodecError> {
    let n = read_uvarint(buf, what)?;
    for _ in 0..n {
        let _tag = read_uvarint(buf, what)?;
        let size = read_uvarint(buf, what)? as usize;
        if buf.remaining() < size {
            return Err(CodecError::Truncated { what, needed: size, remaining: buf.remaining() });
        }
        buf.advance(size);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_header_v2_bytes() {
        let mut b = BytesMut::new();
        encode_request_header(&mut b, 78, 2, 2, 7, "ks");
        assert_eq!(&b[..], &[0, 78, 0, 2, 0, 0, 0, 7, 0, 2, b'k', b's', 0][..]);
    }

    #[test]
    fn request_header_v1_has_no_tags() {
        let mut b = BytesMut::new();
        encode_request_header(&mut b, 3, 12, 1, 1, "");
        assert_eq!(&b[..], &[0, 3, 0, 12, 0, 0, 0, 1, 0, 0][..]);
    }

    #[test]
    fn response_header_v1_skips_tags() {
        // correlation 5, one tagged field (tag 3, 2 bytes), then body 0xAB
        let frame = Bytes::from_static(&[0, 0, 0, 5, 1, 3, 2, 9, 9, 0xAB]);
        assert_eq!(peek_correlation_id(&frame).unwrap(), 5);
        let body = strip_response_header(frame, 1).unwrap();
        assert_eq!(&body[..], &[0xAB]);
    }

    #[test]
    fn truncated_headers_are_errors() {
        assert!(peek_correlation_id(&[0, 1]).is_err());
        assert!(strip_response_header(Bytes::from_static(&[0, 0, 0, 5, 1, 3, 9]), 1).is_err());
        assert!(strip_response_header(Bytes::from_static(&[0, 0]), 0).is_err());
        let mut long = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(read_uvarint(&mut long, "x").is_err());
    }
}
