//! DescribeShareGroupOffsets (key 90) at v0 and v1.
//!
//! The `kafka-protocol` crate (generated from Kafka 4.1) only has v0. Kafka 4.2 added v1
//! (KIP-1226), whose response carries a per-partition `Lag` (int64, after `LeaderEpoch`);
//! the request is the same at both versions. So the request body is encoded by the crate at
//! v0 and the response is decoded here at either version.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::DescribeShareGroupOffsetsRequest;
use kafka_protocol::protocol::Encodable;
use uuid::Uuid;

use crate::protocol::api::ApiRequest;
use crate::protocol::CodecError;

const NAME: &str = "DescribeShareGroupOffsets";

/// The request, sendable at v0 or v1.
pub(crate) struct DescribeOffsetsRequest(pub DescribeShareGroupOffsetsRequest);

/// The decoded response (lag is -1 at v0, and when the broker does not know it).
#[derive(Debug, Default)]
pub(crate) struct DescribeOffsetsResponse {
    pub groups: Vec<GroupOffsets>,
}

#[derive(Debug, Default)]
pub(crate) struct GroupOffsets {
    pub group_id: String,
    pub topics: Vec<TopicOffsets>,
    pub error_code: i16,
    pub error_message: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct TopicOffsets {
    pub name: String,
    #[allow(dead_code)] // kept for completeness; names are what callers use
    pub id: Uuid,
    pub partitions: Vec<PartitionOffsets>,
}

#[derive(Debug, Default)]
pub(crate) struct PartitionOffsets {
    pub partition: i32,
    pub start_offset: i64,
    pub leader_epoch: i32,
    pub lag: i64,
    pub error_code: i16,
    pub error_message: Option<String>,
}

impl ApiRequest for DescribeOffsetsRequest {
    type Response = DescribeOffsetsResponse;
    const KEY: i16 = 90;
    const NAME: &'static str = NAME;

    fn request_header_version(_version: i16) -> i16 {
        2 // flexible from v0
    }

    fn response_header_version(_version: i16) -> i16 {
        1
    }

    fn encode_body(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError> {
        if !(0..=1).contains(&version) {
            return Err(CodecError::UnsupportedVersion { what: NAME, version });
        }
        self.0.encode(buf, 0).map_err(|e| CodecError::Crate { what: NAME, detail: e.to_string() })
    }

    fn decode_response(buf: Bytes, version: i16) -> Result<Self::Response, CodecError> {
        if !(0..=1).contains(&version) {
            return Err(CodecError::UnsupportedVersion { what: NAME, version });
        }
        let mut r = Reader(buf);
        let _throttle = r.i32()?;
        let groups = r.array(|r| {
            let group_id = r.string()?;
            let topics = r.array(|r| {
                let name = r.string()?;
                let id = r.uuid()?;
                let partitions = r.array(|r| {
                    let partition = r.i32()?;
                    let start_offset = r.i64()?;
                    let leader_epoch = r.i32()?;
                    let lag = if version >= 1 { r.i64()? } else { -1 };
                    let error_code = r.i16()?;
                    let error_message = r.nullable_string()?;
                    r.tags()?;
                    Ok(PartitionOffsets { partition, start_offset, leader_epoch, lag, error_code, error_message })
                })?;
                r.tags()?;
                Ok(TopicOffsets { name, id, partitions })
            })?;
            let error_code = r.i16()?;
            let error_message = r.nullable_string()?;
            r.tags()?;
            Ok(GroupOffsets { group_id, topics, error_code, error_message })
        })?;
        r.tags()?;
        if r.0.has_remaining() {
            return Err(CodecError::TrailingBytes { what: NAME, extra: r.0.remaining() });
        }
        Ok(DescribeOffsetsResponse { groups })
    }
}

/// A bounds-checked reader of the compact encoding; never panics, never trusts a length.
struct Reader(Bytes);

impl Reader {
    fn need(&self, n: usize) -> Result<(), CodecError> {
        if self.0.remaining() < n {
            return Err(CodecError::Truncated {
                what: NAME,
                needed: n - self.0.remaining(),
                remaining: self.0.remaining(),
            });
        }
        Ok(())
    }

    fn i16(&mut self) -> Result<i16, CodecError> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }

    fn i32(&mut self) -> Result<i32, CodecError> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }

    fn i64(&mut self) -> Result<i64, CodecError> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }

    fn uuid(&mut self) -> Result<Uuid, CodecError> {
        self.need(16)?;
        let mut raw = [0u8; 16];
        self.0.copy_to_slice(&mut raw);
        Ok(Uuid::from_bytes(raw))
    }

    fn uvarint(&mut self) -> Result<u32, CodecError> {
        let mut v: u32 = 0;
        for i in 0..5 {
            self.need(1)?;
            let b = self.0.get_u8();
            if i == 4 && b > 0x0f {
                return Err(CodecError::Invalid { what: NAME, detail: "varint does not fit in 32 bits".into() });
            }
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError::Invalid { what: NAME, detail: "varint longer than 5 bytes".into() })
    }

    /// Compact length: `N + 1` on the wire, 0 = null.
    fn len(&mut self) -> Result<Option<usize>, CodecError> {
        Ok(self.uvarint()?.checked_sub(1).map(|n| n as usize))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, CodecError> {
        let Some(n) = self.len()? else {
            return Ok(None);
        };
        self.need(n)?;
        let raw = self.0.split_to(n);
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|e| CodecError::Invalid { what: NAME, detail: format!("string not UTF-8: {e}") })
    }

    fn string(&mut self) -> Result<String, CodecError> {
        self.nullable_string()?
            .ok_or_else(|| CodecError::Invalid { what: NAME, detail: "null in a non-nullable string".into() })
    }

    fn array<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T, CodecError>) -> Result<Vec<T>, CodecError> {
        let n = self.len()?.ok_or_else(|| CodecError::Invalid { what: NAME, detail: "null array".into() })?;
        // Each element takes at least one byte: cap the allocation by what is left.
        let mut out = Vec::with_capacity(n.min(self.0.remaining()));
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }

    /// Skips a tagged-field section (the message defines no tags).
    fn tags(&mut self) -> Result<(), CodecError> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.need(size)?;
            self.0.advance(size);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    fn body(version: i16) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i32(0); // throttle
        b.put_u8(2); // 1 group
        b.put_u8(2);
        b.put_slice(b"g");
        b.put_u8(2); // 1 topic
        b.put_u8(2);
        b.put_slice(b"t");
        b.put_slice(&[7u8; 16]);
        b.put_u8(2); // 1 partition
        b.put_i32(3);
        b.put_i64(42);
        b.put_i32(5);
        if version >= 1 {
            b.put_i64(8);
        }
        b.put_i16(0);
        b.put_u8(0); // null message
        b.put_u8(0); // tags
        b.put_u8(0);
        b.put_i16(0);
        b.put_u8(0);
        b.put_u8(0);
        b.put_u8(0);
        b.freeze()
    }

    #[test]
    fn decodes_both_versions() {
        for v in [0, 1] {
            let r = DescribeOffsetsRequest::decode_response(body(v), v).unwrap();
            let p = &r.groups[0].topics[0].partitions[0];
            assert_eq!((p.partition, p.start_offset, p.leader_epoch), (3, 42, 5));
            assert_eq!(p.lag, if v == 1 { 8 } else { -1 });
            assert_eq!(r.groups[0].topics[0].name, "t");
        }
    }

    #[test]
    fn truncation_and_trailing_bytes_are_errors() {
        let full = body(1);
        for cut in 0..full.len() {
            assert!(DescribeOffsetsRequest::decode_response(full.slice(..cut), 1).is_err(), "cut {cut}");
        }
        let mut extra = BytesMut::from(&full[..]);
        extra.put_u8(1);
        assert!(matches!(
            DescribeOffsetsRequest::decode_response(extra.freeze(), 1),
            Err(CodecError::TrailingBytes { .. })
        ));
    }
}
