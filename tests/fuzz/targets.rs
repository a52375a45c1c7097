//! Every response decoder of the crate, each with the valid encodings it is fuzzed from.

use bytes::Bytes;
use kafka_protocol::messages as km;
use kafka_share::protocol::api::ApiRequest;
use kafka_share::protocol::records::{decode_acquired_with, restamp, AcquiredRange, DecodeOptions, ProducerStamp};
use kafka_share::protocol::share::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use kafka_share::protocol::{bounded, frame, private_decoders};
use kafka_share::security::oauthbearer;
use kafka_share::security::scram::{ScramClient, ScramMechanism};
use kafka_share::security::Secret;
use rand::rngs::StdRng;
use rand::Rng;

use super::corpus::{self, Entry};

/// The decompression limit the harness decodes record batches with: small, so that the
/// allocation bound stays tight, and big enough for every batch of the corpus.
pub const MAX_DECOMPRESSED: usize = 64 * 1024;

/// One decoder and where its inputs come from.
pub struct Target {
    pub name: &'static str,
    /// Valid encodings, each with its version.
    pub corpus: Vec<Entry>,
    /// Decodes one input at a version; the RNG picks anything else the decoder takes.
    pub run: fn(&mut StdRng, i16, Bytes),
    /// Whether it decompresses record batches (each may inflate up to [`MAX_DECOMPRESSED`]).
    pub records: bool,
}

fn target(name: &'static str, corpus: Vec<Entry>, run: fn(&mut StdRng, i16, Bytes)) -> Target {
    Target { name, corpus, run, records: false }
}

/// A response of an API the `kafka-protocol` crate decodes (after the bounded walk).
fn via_crate<R: ApiRequest>(_: &mut StdRng, v: i16, body: Bytes) {
    let _ = R::decode_response(body, v);
}

fn options() -> DecodeOptions {
    DecodeOptions { check_crcs: true, max_decompressed: MAX_DECOMPRESSED }
}

/// Acquired ranges as a broker could send them, honest or not.
fn ranges(rng: &mut StdRng) -> Vec<AcquiredRange> {
    (0..rng.gen_range(0..4))
        .map(|_| {
            let first: i64 = if rng.gen_bool(0.9) { rng.gen_range(-2..20) } else { rng.gen() };
            let last = if rng.gen_bool(0.9) { first.saturating_add(rng.gen_range(-1..30)) } else { rng.gen() };
            AcquiredRange { first_offset: first, last_offset: last, delivery_count: rng.gen() }
        })
        .collect()
}

/// ShareFetch as the consumer reads it: the response, then each partition's records.
fn share_fetch(_: &mut StdRng, v: i16, mut body: Bytes) {
    if let Ok(r) = ShareFetchResponse::decode(&mut body, v) {
        for p in r.responses.into_iter().flat_map(|t| t.partitions) {
            let ranges: Vec<AcquiredRange> = p.acquired_records.iter().map(|&a| a.into()).collect();
            let _ = decode_acquired_with(p.records.unwrap_or_default(), &ranges, options());
        }
    }
}

/// Recomputes the CRC of every batch the framing leads to, so that mutations get past the
/// checksum to the decompressors and the record parser.
fn fix_crcs(data: &mut [u8]) {
    let mut at = 0;
    while let Some(header) = data.get(at..at + 21) {
        let len = i32::from_be_bytes([header[8], header[9], header[10], header[11]]);
        let Some(end) = usize::try_from(len).ok().and_then(|l| (at + 12).checked_add(l)).filter(|&e| e <= data.len())
        else {
            return;
        };
        if end < at + 21 {
            return;
        }
        let crc = crc32c::crc32c(&data[at + 21..end]);
        data[at + 17..at + 21].copy_from_slice(&crc.to_be_bytes());
        at = end;
    }
}

fn record_batches(rng: &mut StdRng, _: i16, mut data: Bytes) {
    let ranges = ranges(rng);
    if rng.gen_bool(0.5) {
        let mut fixed = data.to_vec();
        fix_crcs(&mut fixed);
        data = fixed.into();
    }
    let options = DecodeOptions { check_crcs: rng.gen_bool(0.8), ..options() };
    // (`decode_batches`, the tools' decoder, is the same per-batch code with the default
    // 50 MiB limit, too big for the allocation bound here.)
    let _ = decode_acquired_with(data.clone(), &ranges, options);
    let _ = restamp(&data, ProducerStamp { producer_id: 1, producer_epoch: 0, base_sequence: 0 });
}

fn frames(rng: &mut StdRng, v: i16, frame: Bytes) {
    let _ = frame::peek_correlation_id(&frame);
    let _ = frame::strip_response_header(frame.clone(), v.clamp(0, 1));
    let mut b = frame.clone();
    let _ = frame::skip_tagged_fields(&mut b, "fuzz");
    let mut b = frame;
    let _ = frame::read_uvarint(&mut b, "fuzz");
    let _ = rng;
}

fn compact(rng: &mut StdRng, _: i16, data: Bytes) {
    let ops: Vec<u8> = (0..rng.gen_range(1..24)).map(|_| rng.gen()).collect();
    let _ = private_decoders::compact_values(&ops, data);
}

/// The bounded walk alone, at any key and version (it is also the first step of every
/// `kafka-protocol` decode).
fn walk(rng: &mut StdRng, v: i16, body: Bytes) {
    const KEYS: [i16; 22] = [0, 1, 2, 3, 10, 16, 17, 18, 19, 20, 22, 32, 36, 42, 44, 60, 76, 77, 90, 91, 92, 79];
    let key = KEYS[rng.gen_range(0..KEYS.len())];
    let _ = bounded::check(key, v, &body);
}

/// Entries of `msgs` at `versions`, for an API the crate decodes.
fn crate_api<R: ApiRequest>(
    name: &'static str,
    msgs: &[impl kafka_protocol::protocol::Encodable + Clone],
    versions: std::ops::RangeInclusive<i16>,
) -> Target {
    target(name, corpus::crate_message(msgs, versions), via_crate::<R>)
}

/// A default response, for the APIs whose shape matters less than their presence.
fn default_api<R: ApiRequest, M: kafka_protocol::protocol::Encodable + Clone + Default>(
    name: &'static str,
    versions: std::ops::RangeInclusive<i16>,
) -> Target {
    crate_api::<R>(name, &[M::default()], versions)
}

/// Every target.
pub fn all() -> Vec<Target> {
    let record_sets: Vec<Entry> = corpus::record_sets().into_iter().map(|b| (0, b.to_vec())).collect();
    let share_fetch_corpus = corpus::share_fetch();
    let mut frame_corpus: Vec<Entry> =
        share_fetch_corpus.iter().take(3).map(|(_, b)| (1, [&[0, 0, 0, 7, 0][..], b].concat())).collect();
    frame_corpus.push((0, vec![0, 0, 0, 9, 1, 2, 3]));
    let mut walk_corpus = Vec::new();
    let mut targets = vec![
        Target { name: "ShareFetch response + records", corpus: share_fetch_corpus, run: share_fetch, records: true },
        target("ShareAcknowledge response", corpus::share_acknowledge(), |_, v, mut b| {
            let _ = ShareAcknowledgeResponse::decode(&mut b, v);
        }),
        target("ShareFetch request", corpus::share_fetch_request(), |_, v, mut b| {
            let _ = ShareFetchRequest::decode(&mut b, v);
        }),
        target("ShareAcknowledge request", corpus::share_acknowledge_request(), |_, v, mut b| {
            let _ = ShareAcknowledgeRequest::decode(&mut b, v);
        }),
        Target { name: "record batches", corpus: record_sets, run: record_batches, records: true },
        target(
            "DescribeShareGroupOffsets (own codec)",
            vec![(0, corpus::describe_offsets(0)), (1, corpus::describe_offsets(1))],
            |_, v, b| {
                let _ = private_decoders::describe_share_group_offsets(b, v);
            },
        ),
        target("frame headers", frame_corpus, frames),
        crate_api::<km::MetadataRequest>("Metadata", &corpus::metadata(), 0..=13),
        crate_api::<km::ShareGroupHeartbeatRequest>("ShareGroupHeartbeat", &corpus::heartbeat(), 1..=1),
        crate_api::<km::ApiVersionsRequest>("ApiVersions", &corpus::api_versions(), 0..=4),
        crate_api::<km::FindCoordinatorRequest>("FindCoordinator", &corpus::find_coordinator(), 0..=6),
        default_api::<km::ProduceRequest, km::ProduceResponse>("Produce", 3..=13),
        default_api::<km::ListOffsetsRequest, km::ListOffsetsResponse>("ListOffsets", 1..=10),
        default_api::<km::ListGroupsRequest, km::ListGroupsResponse>("ListGroups", 0..=5),
        default_api::<km::SaslHandshakeRequest, km::SaslHandshakeResponse>("SaslHandshake", 0..=1),
        default_api::<km::SaslAuthenticateRequest, km::SaslAuthenticateResponse>("SaslAuthenticate", 0..=2),
        default_api::<km::CreateTopicsRequest, km::CreateTopicsResponse>("CreateTopics", 2..=7),
        default_api::<km::DeleteTopicsRequest, km::DeleteTopicsResponse>("DeleteTopics", 1..=6),
        default_api::<km::DeleteRecordsRequest, km::DeleteRecordsResponse>("DeleteRecords", 0..=2),
        default_api::<km::InitProducerIdRequest, km::InitProducerIdResponse>("InitProducerId", 0..=6),
        default_api::<km::DescribeConfigsRequest, km::DescribeConfigsResponse>("DescribeConfigs", 1..=4),
        default_api::<km::DeleteGroupsRequest, km::DeleteGroupsResponse>("DeleteGroups", 0..=2),
        default_api::<km::IncrementalAlterConfigsRequest, km::IncrementalAlterConfigsResponse>(
            "IncrementalAlterConfigs",
            0..=1,
        ),
        default_api::<km::DescribeClusterRequest, km::DescribeClusterResponse>("DescribeCluster", 0..=2),
        default_api::<km::ShareGroupDescribeRequest, km::ShareGroupDescribeResponse>("ShareGroupDescribe", 1..=1),
        default_api::<km::DescribeShareGroupOffsetsRequest, km::DescribeShareGroupOffsetsResponse>(
            "DescribeShareGroupOffsets (crate)",
            0..=0,
        ),
        default_api::<km::AlterShareGroupOffsetsRequest, km::AlterShareGroupOffsetsResponse>(
            "AlterShareGroupOffsets",
            0..=0,
        ),
        default_api::<km::DeleteShareGroupOffsetsRequest, km::DeleteShareGroupOffsetsResponse>(
            "DeleteShareGroupOffsets",
            0..=0,
        ),
    ];
    // The walk is fuzzed from every crate-decoded response.
    for t in &targets[7..] {
        walk_corpus.extend(t.corpus.iter().cloned());
    }
    targets.push(target("bounded walk", walk_corpus.clone(), walk));
    targets.push(target("compact readers", walk_corpus, compact));
    targets.extend(sasl_targets());
    targets
}

/// The SASL messages a broker sends during a login: SCRAM's server-first and server-final
/// messages and OAUTHBEARER's answer (an error challenge is JSON).
fn sasl_targets() -> Vec<Target> {
    let server_first = format!("r={SCRAM_NONCE}srv3rn0nce,s={},i=4096", SCRAM_SALT_B64);
    let server_final = b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=".to_vec();
    let oauth = br#"{"status":"invalid_token","scope":"kafka","openid-configuration":"https://idp/.well-known"}"#;
    vec![
        target(
            "SCRAM server-first",
            vec![(0, server_first.clone().into_bytes()), (1, b"e=other-error".to_vec())],
            scram_first,
        ),
        target("SCRAM server-final", vec![(0, server_final), (1, b"e=invalid-proof".to_vec())], scram_final),
        target("OAUTHBEARER server answer", vec![(0, oauth.to_vec()), (0, Vec::new())], |_, _, b| {
            let _ = oauthbearer::handle_server_message(&b);
        }),
    ]
}

const SCRAM_NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";
const SCRAM_SALT_B64: &str = "QSXCR+Q6sek8bf92";

/// A SCRAM client (version 0: SHA-256, else SHA-512) after its client-first message.
fn scram_client(v: i16) -> ScramClient {
    let mechanism = if v == 0 { ScramMechanism::Sha256 } else { ScramMechanism::Sha512 };
    let mut c = ScramClient::with_nonce(mechanism, "user", Secret::new("pencil"), SCRAM_NONCE).expect("a valid nonce");
    let _ = c.client_first();
    c
}

/// Whether a server-first message asks for more PBKDF2 iterations than the harness spends
/// per input (the client takes up to its MAX_ITERATIONS; only the time is at stake here).
fn too_many_iterations(message: &[u8]) -> bool {
    let text = String::from_utf8_lossy(message);
    text.split(',')
        .filter_map(|f| f.strip_prefix("i="))
        .any(|n| n.parse::<u64>().is_ok_and(|n| n > 8192))
}

fn scram_first(_: &mut StdRng, v: i16, b: Bytes) {
    if too_many_iterations(&b) {
        return;
    }
    let _ = scram_client(v % 2).handle_server_first(&b);
}

fn scram_final(_: &mut StdRng, v: i16, b: Bytes) {
    let mut c = scram_client(v % 2);
    let first = format!("r={SCRAM_NONCE}srv3rn0nce,s={SCRAM_SALT_B64},i=4096");
    if c.handle_server_first(first.as_bytes()).is_ok() {
        let _ = c.handle_server_final(&b);
    }
}
