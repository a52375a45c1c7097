//! Input generation from one seed: a mutation of a valid encoding (bit flips, byte edits,
//! inserts and deletes, length fields overwritten with hostile values, truncation, splices
//! with another valid encoding) or plain random bytes.

use rand::rngs::StdRng;
use rand::Rng;

/// Values a length or count field is most likely to go wrong with, as big-endian `i32`s.
const HOSTILE_I32: [i32; 8] = [-2, -1, 0, 1, 0x7f, 0x7fff, i32::MAX, i32::MIN];

/// Unsigned varints a compact length is most likely to go wrong with.
const HOSTILE_UVARINT: [&[u8]; 6] =
    [&[0], &[1], &[0x7f], &[0xff, 0x7f], &[0xff, 0xff, 0xff, 0xff, 0x0f], &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]];

/// Random bytes: mostly short, sometimes a few KB.
pub fn random(rng: &mut StdRng) -> Vec<u8> {
    let len = if rng.gen_bool(0.9) { rng.gen_range(0..=256) } else { rng.gen_range(0..=4096) };
    (0..len).map(|_| rng.gen()).collect()
}

/// `base` with one to four mutations; `other` is a second valid encoding to splice from.
pub fn mutate(rng: &mut StdRng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        mutate_once(rng, &mut b, other);
    }
    b
}

fn mutate_once(rng: &mut StdRng, b: &mut Vec<u8>, other: &[u8]) {
    let at = |rng: &mut StdRng, len: usize| if len == 0 { 0 } else { rng.gen_range(0..len) };
    match rng.gen_range(0..10) {
        0 => {
            if !b.is_empty() {
                let i = at(rng, b.len());
                b[i] ^= 1 << rng.gen_range(0..8);
            }
        }
        1 => {
            if !b.is_empty() {
                let i = at(rng, b.len());
                b[i] = [0, 1, 0x7f, 0x80, 0xff, rng.gen()][rng.gen_range(0..6)];
            }
        }
        2 => {
            let i = at(rng, b.len() + 1);
            let n = rng.gen_range(1..=16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
            b.splice(i..i, bytes);
        }
        3 => {
            if !b.is_empty() {
                let i = at(rng, b.len());
                let n = rng.gen_range(1..=16).min(b.len() - i);
                b.drain(i..i + n);
            }
        }
        4 => {
            // A length or count field (fixed width) overwritten.
            if b.len() >= 4 {
                let i = at(rng, b.len() - 3);
                let v = HOSTILE_I32[rng.gen_range(0..HOSTILE_I32.len())];
                b[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
        }
        5 => {
            // A compact length or count replaced by a hostile varint.
            if !b.is_empty() {
                let i = at(rng, b.len());
                let v = HOSTILE_UVARINT[rng.gen_range(0..HOSTILE_UVARINT.len())];
                b.splice(i..i + 1, v.iter().copied());
            }
        }
        6 => {
            let cut = at(rng, b.len() + 1);
            b.truncate(cut);
        }
        7 => {
            // Splice: our head, the other encoding's tail.
            let i = at(rng, b.len() + 1);
            let j = at(rng, other.len() + 1);
            b.truncate(i);
            b.extend_from_slice(&other[j..]);
        }
        8 => {
            // A stretch repeated (duplicated elements, as a lying count would want).
            if !b.is_empty() {
                let i = at(rng, b.len());
                let n = rng.gen_range(1..=32).min(b.len() - i);
                let copy = b[i..i + n].to_vec();
                b.splice(i..i, copy);
            }
        }
        _ => {
            // A small arithmetic change, as an off-by-one length.
            if !b.is_empty() {
                let i = at(rng, b.len());
                b[i] = b[i].wrapping_add(if rng.gen() { 1 } else { 255 });
            }
        }
    }
}
