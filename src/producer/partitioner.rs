//! Choosing a partition exactly as the Java client does, so that Rust and Java producers put
//! the same key on the same partition.

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 with seed `0x9747b28c`, returned as Java's
/// signed `int`.
#[cfg_attr(not(feature = "unstable-internals"), allow(unreachable_pub))]
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java mixes in the length as an int; keys longer than 4 GiB do not exist in Kafka.
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate().rev() {
            h ^= u32::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Java's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on `MIN`).
#[cfg_attr(not(feature = "unstable-internals"), allow(unreachable_pub))]
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition of a keyed record among `num_partitions` (> 0), as the Java client picks it.
// Used by tests only; the producer hashes before taking its lock (PartitionChoice).
#[cfg_attr(not(feature = "unstable-internals"), allow(unreachable_pub, dead_code))]
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    to_positive(murmur2(key)) % num_partitions
}

/// How `send` asked for a partition; resolved under the accumulator lock, where the partition
/// count and the sticky state live. The key hash is computed before taking the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartitionChoice {
    /// The record named its partition.
    Explicit(i32),
    /// `murmur2(key)`.
    Hash(i32),
    /// No key (or keys ignored): the sticky partition.
    Sticky,
}

impl PartitionChoice {
    pub(super) fn new(partition: Option<i32>, key: Option<&[u8]>, ignore_keys: bool) -> Self {
        match (partition, key) {
            (Some(p), _) => PartitionChoice::Explicit(p),
            (None, Some(k)) if !ignore_keys => PartitionChoice::Hash(murmur2(k)),
            _ => PartitionChoice::Sticky,
        }
    }
}

/// Keyless records of a topic stick to one partition until its batch is sent or full, then
/// move on to the next partition (KIP-480's sticky partitioner, round-robin between
/// batches): large batches without hot-spotting one partition.
#[derive(Debug, Clone)]
pub(crate) struct Sticky {
    current: Option<i32>,
    next: u32,
}

impl Sticky {
    /// Starts at a random partition so that many producers do not all begin on partition 0.
    pub(super) fn new() -> Self {
        Sticky { current: None, next: rand::random::<u32>() }
    }

    /// The current sticky partition, if one was chosen and is still below `num_partitions`.
    pub(super) fn current(&self, num_partitions: i32) -> Option<i32> {
        self.current.filter(|p| *p < num_partitions)
    }

    /// Moves to the next partition (round-robin) and returns it.
    pub(super) fn advance(&mut self, num_partitions: i32) -> i32 {
        let p = (self.next % num_partitions.max(1) as u32) as i32;
        self.next = self.next.wrapping_add(1);
        self.current = Some(p);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of the Java client's `Utils.murmur2`: Kafka's own UtilsTest.testMurmur2, and
    /// librdkafka's Java-verified vectors (which cover every tail length, and the empty key).
    #[test]
    fn murmur2_matches_java() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
            (b"abc", 479470107),
            (b"kafka", 0xd067cf64_u32 as i32),
            (b"giberish123456789", 0x8f552b0c_u32 as i32),
            (b"1234", 0x9fc97b14_u32 as i32),
            (b"234", 0xe7c009ca_u32 as i32),
            (b"34", 0x873930da_u32 as i32),
            (b"4", 0x5a4b5ca1_u32 as i32),
            (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424f1c_u32 as i32),
            (b"", 0x106e08d9_u32 as i32),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input), *expected, "murmur2({:?})", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn key_partition_is_positive_modulo() {
        // toPositive(-973932308) = 1173551340
        assert_eq!(to_positive(-973932308), 1173551340);
        assert_eq!(partition_for_key(b"21", 3), 1173551340 % 3);
        assert_eq!(partition_for_key(b"abc", 10), 479470107 % 10);
        assert_eq!(to_positive(i32::MIN), 0);
        for key in [&b""[..], b"x", b"foobar", b"a-little-bit-long-string"] {
            let p = partition_for_key(key, 7);
            assert!((0..7).contains(&p));
        }
    }

    #[test]
    fn choice_follows_java_rules() {
        assert_eq!(PartitionChoice::new(Some(4), Some(b"k"), false), PartitionChoice::Explicit(4));
        assert_eq!(PartitionChoice::new(None, Some(b"21"), false), PartitionChoice::Hash(-973932308));
        assert_eq!(PartitionChoice::new(None, Some(b"21"), true), PartitionChoice::Sticky);
        assert_eq!(PartitionChoice::new(None, None, false), PartitionChoice::Sticky);
        // An empty key is a key (Java hashes it), not a null key.
        assert!(matches!(PartitionChoice::new(None, Some(b""), false), PartitionChoice::Hash(_)));
    }

    #[test]
    fn sticky_round_robins() {
        let mut s = Sticky::new();
        assert_eq!(s.current(3), None);
        let a = s.advance(3);
        assert_eq!(s.current(3), Some(a));
        let b = s.advance(3);
        let c = s.advance(3);
        let mut all = vec![a, b, c];
        all.sort();
        assert_eq!(all, vec![0, 1, 2]);
        assert_eq!(s.current(c), None, "a shrunk partition count invalidates the choice");
    }
}
