//! One trait for every request this crate sends, whichever codec encodes it.
//!
//! Most APIs are encoded by the `kafka-protocol` crate; ShareFetch and ShareAcknowledge are
//! encoded by this crate (the crate stops at v1). The connection layer only sees this trait,
//! so it does not care which codec a message comes from.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};

use super::CodecError;

/// A request message: how to encode it, and how to decode its response.
pub trait ApiRequest {
    /// The response type.
    type Response;
    /// The API key.
    const KEY: i16;
    /// A human name for errors and traces, e.g. "ShareFetch".
    const NAME: &'static str;

    /// The request header version for this API at `version`.
    fn request_header_version(version: i16) -> i16;
    /// The response header version for this API at `version`.
    fn response_header_version(version: i16) -> i16;
    /// Encodes the body (no header) at `version`.
    fn encode_body(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError>;
    /// Decodes a response body (header already stripped) at `version`. Must consume it all.
    fn decode_response(buf: Bytes, version: i16) -> Result<Self::Response, CodecError>;
}

/// A short name for an API key, for messages and traces.
pub const fn api_name(key: i16) -> &'static str {
    match key {
        0 => "Produce",
        1 => "Fetch",
        2 => "ListOffsets",
        3 => "Metadata",
        10 => "FindCoordinator",
        16 => "ListGroups",
        18 => "ApiVersions",
        19 => "CreateTopics",
        20 => "DeleteTopics",
        21 => "DeleteRecords",
        22 => "InitProducerId",
        32 => "DescribeConfigs",
        36 => "SaslAuthenticate",
        17 => "SaslHandshake",
        42 => "DeleteGroups",
        44 => "IncrementalAlterConfigs",
        60 => "DescribeCluster",
        76 => "ShareGroupHeartbeat",
        77 => "ShareGroupDescribe",
        78 => "ShareFetch",
        79 => "ShareAcknowledge",
        90 => "DescribeShareGroupOffsets",
        91 => "AlterShareGroupOffsets",
        92 => "DeleteShareGroupOffsets",
        _ => "KafkaApi",
    }
}

/// Whether a request of this API only reads: the broker changes nothing for it, so a lost
/// answer is a plain timeout or closed connection, never an "outcome unknown" (the
/// connection layer asks). Every API this crate sends that is not listed here may change
/// something (a heartbeat, a fetch that acquires records, an alter).
pub const fn is_read_only(key: i16) -> bool {
    matches!(
        key,
        // Fetch, ListOffsets, Metadata, OffsetFetch, FindCoordinator, DescribeGroups,
        // ListGroups, ApiVersions, DescribeConfigs, DescribeCluster, ConsumerGroupDescribe,
        // DescribeTopicPartitions, ShareGroupDescribe, DescribeShareGroupOffsets.
        1 | 2 | 3 | 9 | 10 | 15 | 16 | 18 | 32 | 60 | 69 | 75 | 77 | 90
    )
}

/// Every `kafka-protocol` request is an [`ApiRequest`].
impl<T> ApiRequest for T
where
    T: Request,
{
    type Response = T::Response;
    const KEY: i16 = T::KEY;
    const NAME: &'static str = api_name(T::KEY);

    fn request_header_version(version: i16) -> i16 {
        <T as HeaderVersion>::header_version(version)
    }

    fn response_header_version(version: i16) -> i16 {
        <T::Response as HeaderVersion>::header_version(version)
    }

    fn encode_body(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError> {
        Encodable::encode(self, buf, version).map_err(|e| CodecError::Crate { what: Self::NAME, detail: e.to_string() })
    }

    fn decode_response(mut buf: Bytes, version: i16) -> Result<Self::Response, CodecError> {
        // The crate sizes arrays by the count on the wire before reading them: check the shape
        // first, so a hostile count is an error rather than an allocation abort.
        super::bounded::check(T::KEY, version, &buf)?;
        let r = <T::Response as Decodable>::decode(&mut buf, version)
            .map_err(|e| CodecError::Crate { what: Self::NAME, detail: e.to_string() })?;
        if buf.has_remaining() {
            return Err(CodecError::TrailingBytes { what: Self::NAME, extra: buf.remaining() });
        }
        Ok(r)
    }
}

/// ShareFetch and ShareAcknowledge use this crate's own codec (v1 and v2).
macro_rules! own_share_api {
    ($req:ty, $resp:ty, $key:expr, $name:literal) => {
        impl ApiRequest for $req {
            type Response = $resp;
            const KEY: i16 = $key;
            const NAME: &'static str = $name;

            fn request_header_version(_version: i16) -> i16 {
                super::share::REQUEST_HEADER_VERSION
            }

            fn response_header_version(_version: i16) -> i16 {
                super::share::RESPONSE_HEADER_VERSION
            }

            fn encode_body(&self, version: i16, buf: &mut BytesMut) -> Result<(), CodecError> {
                self.encode(version, buf)
            }

            fn decode_response(mut buf: Bytes, version: i16) -> Result<Self::Response, CodecError> {
                <$resp>::decode(&mut buf, version)
            }
        }
    };
}

own_share_api!(
    super::share::ShareFetchRequest,
    super::share::ShareFetchResponse,
    super::share::SHARE_FETCH_API_KEY,
    "ShareFetch"
);
own_share_api!(
    super::share::ShareAcknowledgeRequest,
    super::share::ShareAcknowledgeResponse,
    super::share::SHARE_ACKNOWLEDGE_API_KEY,
    "ShareAcknowledge"
);
