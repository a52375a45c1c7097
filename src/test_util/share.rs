//! ShareFetch and ShareAcknowledge over TCP: decoded by the server, answered by the broker
//! model's handlers (`crate::broker_model::share_fetch`, `share_acknowledge`) over the fake's
//! state ([`FakeBroker`]), encoded with the crate's own codec; and the record batches the fake
//! serves.

use std::time::{Duration, Instant};

use crate::protocol::records::{BatchBuilder, RecordInput};
use crate::protocol::share::{
    AcquiredRecords, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use bytes::{BufMut, Bytes, BytesMut};

use super::broker::FakeBroker;
use super::script::Effects;
use super::state::{Partition, Shared};
use super::wire::Out;
use crate::broker_model::broker::Cx;
use crate::broker_model::share_acknowledge;
use crate::broker_model::share_fetch::{self, FetchOutcome};

fn reply_fetch(shared: &Shared, resp: &ShareFetchResponse, version: i16) -> Out {
    let mut buf = BytesMut::new();
    match resp.encode(version, &mut buf) {
        Ok(()) => Out::Reply(buf),
        Err(e) => {
            shared.lock().violation(format!("fake broker failed to encode ShareFetch response: {e}"));
            Out::Drop
        }
    }
}

fn reply_ack(shared: &Shared, resp: &ShareAcknowledgeResponse, version: i16) -> Out {
    let mut buf = BytesMut::new();
    match resp.encode(version, &mut buf) {
        Ok(()) => Out::Reply(buf),
        Err(e) => {
            shared.lock().violation(format!("fake broker failed to encode ShareAcknowledge response: {e}"));
            Out::Drop
        }
    }
}

pub(super) async fn fetch(
    shared: &Shared,
    node: i32,
    conn: u64,
    version: i16,
    r: &ShareFetchRequest,
    fx: &Effects,
) -> Out {
    let member = r.member_id.to_string();
    let cx = Cx { node, conn, version, now: Instant::now() };
    let started = share_fetch::handle(&mut FakeBroker { st: &mut shared.lock(), fx }, &cx, &member, r);
    let resp = match started {
        FetchOutcome::Answer(resp) => resp,
        // Long poll: look again every few milliseconds until records come or MaxWaitMs passes.
        FetchOutcome::Wait(w) => loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let polled = share_fetch::poll(&mut FakeBroker { st: &mut shared.lock(), fx }, &w, Instant::now());
            if let Some(resp) = polled {
                break resp;
            }
        },
    };
    reply_fetch(shared, &resp, version)
}

/// The record batches for the acquired runs `got`; an error if the records do not fit in a
/// batch.
pub(super) fn build_records(part: &Partition, p: i32, got: &[AcquiredRecords]) -> Result<Option<Bytes>, String> {
    let ranges = got;
    let end = part.share.log_end();
    let mut data: Vec<i64> = Vec::new();
    let mut gap_runs: Vec<(i64, i64)> = Vec::new();
    for r in ranges {
        let (lo, hi) = if part.pad {
            ((r.first_offset - 1).max(0), (r.last_offset + 1).min(end - 1))
        } else {
            (r.first_offset, r.last_offset)
        };
        for o in lo..=hi {
            if part.gaps.contains(&o) {
                match gap_runs.last_mut() {
                    Some(g) if g.1 + 1 == o => g.1 = o,
                    _ => gap_runs.push((o, o)),
                }
            } else {
                data.push(o);
            }
        }
    }
    data.sort_unstable();
    data.dedup();
    let mut batches: Vec<(i64, Bytes)> = Vec::new();
    let mut run: Vec<i64> = Vec::new();
    // A run of consecutive offsets is one batch; corrupt offsets get batches of their own.
    let corrupt = |o: &i64| part.corrupt.contains(o);
    let batch = |run: &[i64]| -> Result<(i64, Bytes), String> {
        let (base, b) = data_batch(part, p, run)?;
        Ok((base, if corrupt(&base) { bad_crc(b) } else { b }))
    };
    for o in data {
        if run.last().is_some_and(|l| l + 1 != o || corrupt(l) != corrupt(&o)) {
            batches.push(batch(&run)?);
            run.clear();
        }
        run.push(o);
    }
    if !run.is_empty() {
        batches.push(batch(&run)?);
    }
    if part.empty_batches {
        batches.extend(gap_runs.iter().map(|&(a, b)| (a, crate::protocol::records::empty_batch(a, b))));
    }
    batches.sort_by_key(|(base, _)| *base);
    let mut out = BytesMut::new();
    for (_, b) in batches {
        out.put_slice(&b);
    }
    Ok((!out.is_empty()).then(|| out.freeze()))
}

/// The value of the record the fake generates at `offset` of partition `p` (`"p{p}-{offset}"`;
/// its key is `"k{offset}"`).
pub fn record_value(p: i32, offset: i64) -> String {
    format!("p{p}-{offset}")
}

/// One batch holding the records at consecutive `offsets` (not empty) of partition `p`.
fn data_batch(part: &Partition, p: i32, offsets: &[i64]) -> Result<(i64, Bytes), String> {
    let mut b = BatchBuilder::new();
    for &o in offsets {
        let produced = usize::try_from(o).ok().and_then(|i| part.records.get(i)).and_then(|r| r.as_deref());
        let generated;
        let record = match produced {
            Some(r) => r,
            None => {
                generated = RecordInput {
                    key: Some(Bytes::from(format!("k{o}"))),
                    value: Some(Bytes::from(record_value(p, o))),
                    headers: Vec::new(),
                    timestamp: 1_700_000_000_000 + o,
                };
                &generated
            }
        };
        b.push(record).map_err(|e| format!("offset {o}: {e}"))?;
    }
    let batch = b.finish(part.compression).map_err(|e| e.to_string())?;
    let mut batch = BytesMut::from(&batch[..]);
    // The base offset is outside the CRC: patching it keeps the batch valid.
    batch[..8].copy_from_slice(&offsets[0].to_be_bytes());
    Ok((offsets[0], batch.freeze()))
}

/// `batch` with its stored CRC flipped: only the checksum is wrong.
fn bad_crc(batch: Bytes) -> Bytes {
    let mut b = BytesMut::from(&batch[..]);
    b[17] ^= 0xff;
    b.freeze()
}

pub(super) fn acknowledge(shared: &Shared, node: i32, version: i16, r: &ShareAcknowledgeRequest, fx: &Effects) -> Out {
    let member = r.member_id.to_string();
    // A ShareAcknowledge opens no session: its connection is not read.
    let cx = Cx { node, conn: 0, version, now: Instant::now() };
    let resp = share_acknowledge::handle(&mut FakeBroker { st: &mut shared.lock(), fx }, &cx, &member, r);
    reply_ack(shared, &resp, version)
}
