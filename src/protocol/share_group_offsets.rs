//! DescribeShareGroupOffsets (key 90) at v0 and v1.
//!
//! The `kafka-protocol` crate (generated from Kafka 4.1) only has v0. Kafka 4.2 added v1
//! (KIP-1226), whose response carries a per-partition `Lag` (int64, after `LeaderEpoch`);
//! the request is the same at both versions. So the request body is encoded by the crate at
//! v0 and the response is decoded here at either version, with the shared compact reader
//! (every error names the message).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::DescribeShareGroupOffsetsRequest;
use kafka_protocol::protocol::Encodable;
use uuid::Uuid;

use super::api::ApiRequest;
use super::compact::{
    decode_whole, get_array, get_i16, get_i32, get_i64, get_nullable_string, get_string, get_uuid, skip_tagged_fields,
};
use super::CodecError;

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

    fn decode_response(mut buf: Bytes, version: i16) -> Result<Self::Response, CodecError> {
        if !(0..=1).contains(&version) {
            return Err(CodecError::UnsupportedVersion { what: NAME, version });
        }
        decode_whole(&mut buf, NAME, |r| {
            let _throttle = get_i32(r, NAME)?;
            let groups = get_array(r, NAME, |r| {
                let group_id = get_string(r, NAME)?;
                let topics = get_array(r, NAME, |r| {
                    let name = get_string(r, NAME)?;
                    let id = get_uuid(r, NAME)?;
                    let partitions = get_array(r, NAME, |r| {
                        let partition = get_i32(r, NAME)?;
                        let start_offset = get_i64(r, NAME)?;
                        let leader_epoch = get_i32(r, NAME)?;
                        let lag = if version >= 1 { get_i64(r, NAME)? } else { -1 };
                        let error_code = get_i16(r, NAME)?;
                        let error_message = get_nullable_string(r, NAME)?;
                        skip_tagged_fields(r, NAME)?;
                        Ok(PartitionOffsets { partition, start_offset, leader_epoch, lag, error_code, error_message })
                    })?;
                    skip_tagged_fields(r, NAME)?;
                    Ok(TopicOffsets { name, id, partitions })
                })?;
                let error_code = get_i16(r, NAME)?;
                let error_message = get_nullable_string(r, NAME)?;
                skip_tagged_fields(r, NAME)?;
                Ok(GroupOffsets { group_id, topics, error_code, error_message })
            })?;
            skip_tagged_fields(r, NAME)?;
            Ok(DescribeOffsetsResponse { groups })
        })
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

    #[test]
    fn a_huge_count_is_an_error_naming_the_message_not_an_allocation() {
        let mut b = BytesMut::new();
        b.put_i32(0); // throttle
        b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // 2^32 - 2 groups, then nothing
        assert!(matches!(
            DescribeOffsetsRequest::decode_response(b.freeze(), 1),
            Err(CodecError::Truncated { what: NAME, .. })
        ));
    }
}
