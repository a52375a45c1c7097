//! A deterministic simulation of the share consumer's driver core against a simulated
//! cluster, in virtual time, under faults drawn from a seed (issue 12, part 2).
//!
//! - `cluster.rs`, `group.rs`, `share.rs`: the simulated brokers, coordinator and share RPCs,
//!   around the crate's one broker model (`crate::broker_model`: share partitions, locks, the
//!   delivery limit, acknowledgement checks, share sessions and epochs; the fake cluster's
//!   too), fed virtual time; `state.rs`: what the sim adds (who holds a lock, every
//!   delivery, gaps); `topology.rs`: the client's view of them.
//! - `net.rs`: connections and requests in flight; `faults.rs`: the seed's fault schedule;
//!   `rng.rs`: the generators every part draws from; `reply.rs`: the core's replies.
//! - `app.rs`: the application (`handle_app.rs`: through the handle's bookkeeping);
//!   `invariants.rs`: what must hold; `run.rs`: the runner (`run/network.rs`: its network
//!   side, requests out and answers back).
//!
//! `SIM_SEED=<n>` replays one seed; `SIM_SEEDS=<n>` runs that many.

mod app;
mod cluster;
mod core;
mod engine_app;
mod faults;
mod group;
mod handle_app;
mod invariants;
mod net;
mod reply;
mod rng;
mod run;
mod share;
mod state;
mod topology;

#[cfg(test)]
mod tests;
