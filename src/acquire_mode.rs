//! [`AcquireMode`]: `share.acquire.mode`, which the consumer's config sets and the error of a
//! cluster that cannot honour it names; a leaf, so that the error type need not know the
//! consumer.

/// `share.acquire.mode` (Kafka 4.2+, ShareFetch v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcquireMode {
    /// The broker may hand out whole batches, and the consumer prefetches (the default).
    #[default]
    BatchOptimized,
    /// At most `max.poll.records` records are acquired per poll, with no prefetch: a hard cap.
    /// Needs ShareFetch v2 (Kafka 4.2+): on an older cluster `ShareConsumer::connect` fails
    /// with [`Error::AcquireModeUnsupported`](crate::error::Error::AcquireModeUnsupported).
    RecordLimit,
}

impl AcquireMode {
    /// The value of `share.acquire.mode` that selects it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AcquireMode::BatchOptimized => "batch_optimized",
            AcquireMode::RecordLimit => "record_limit",
        }
    }
}
