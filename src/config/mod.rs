//! Settings under their Java names.
//!
//! Every client (share consumer, producer, admin) is configured either with a typed builder or
//! with the Java client's property names from a map or a `.properties` file: [`Properties`]
//! holds them and reads typed values; which client reads, ignores or refuses which key is one
//! table, `keys.rs`. Each client's config reads its own keys (the shared ones, bootstrap,
//! timeouts and security, into the cluster's settings). This module sits under all of them and
//! knows none.

pub(crate) mod keys;
mod properties;

pub(crate) use keys::{finish, refuse, Client};
pub use properties::Properties;

/// Java's default `client.id` for a producer (`producer-<n>`) or an admin client
/// (`adminclient-<n>`): `n` counts such clients of this process, from 1, as Java's sequences do.
/// (The share consumer's, `consumer-<group>-<n>`, is in `consumer/config.rs`.)
pub(crate) fn numbered_client_id(client: Client) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static PRODUCERS: AtomicU64 = AtomicU64::new(1);
    static ADMINS: AtomicU64 = AtomicU64::new(1);
    let (prefix, sequence) = match client {
        Client::Producer => ("producer", &PRODUCERS),
        Client::Admin | Client::ShareConsumer => ("adminclient", &ADMINS),
    };
    format!("{prefix}-{}", sequence.fetch_add(1, Ordering::Relaxed))
}

/// The `client.id` a properties file sets, or (absent or empty, as in Java) `default()`.
pub(crate) fn client_id_or(p: &Properties, default: impl FnOnce() -> String) -> String {
    match p.get("client.id") {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => default(),
    }
}
