//! A blocking admin client for programs without an async runtime. It owns a small runtime
//! (one worker thread) for its connections, as the blocking consumer and producer do.
//!
//! The calls services make most have blocking forms here; every other [`super::Admin`] call
//! runs through [`Admin::run`], which blocks on it:
//!
//! ```no_run
//! use kafka_share::admin::blocking;
//!
//! let admin = blocking::Admin::connect_to("127.0.0.1:19092")?;
//! admin.create_topic("orders", 3)?;
//! for g in admin.list_share_groups()? {
//!     println!("{}", g.group_id);
//! }
//! // Any other call of the async Admin, blocking:
//! let cluster = admin.run(async |a| a.describe_cluster().await)?;
//! println!("{} brokers", cluster.brokers.len());
//! # Ok::<(), kafka_share::Error>(())
//! ```
//!
//! Every call blocks its thread: in async code use the async [`super::Admin`] (a call made on
//! an async runtime's thread works, and never panics, but stalls that thread meanwhile).
//! Dropping one is fine anywhere, an async task included.

use super::{NewTopic, ShareGroupDescription, ShareGroupListing, ShareGroupOffsets, TopicListing};
use crate::blocking_runtime::OwnedRuntime;
use crate::cluster::ClusterConfig;
use crate::config::Properties;
use crate::error::Result;

/// A blocking wrapper around [`super::Admin`] and the runtime its connections run on.
/// Dropping it closes the connections; it never panics, wherever it is dropped.
#[derive(Debug)]
pub struct Admin {
    admin: super::Admin,
    // Declared after `admin`, so it is dropped after it: the connections' tasks stop with it.
    rt: OwnedRuntime,
}

impl Admin {
    /// Connects (see [`super::Admin::connect`]).
    pub fn connect(config: ClusterConfig) -> Result<Admin> {
        Admin::start(|| super::Admin::connect(config))
    }

    /// Connects with default settings (see [`super::Admin::connect_to`]).
    pub fn connect_to(bootstrap: &str) -> Result<Admin> {
        Admin::start(|| super::Admin::connect_to(bootstrap))
    }

    /// Connects with settings from a Java-style properties file's keys (see
    /// [`super::Admin::from_properties`]).
    pub fn from_properties(p: &Properties) -> Result<Admin> {
        Admin::start(|| super::Admin::from_properties(p))
    }

    fn start<F: std::future::Future<Output = Result<super::Admin>>>(connect: impl FnOnce() -> F) -> Result<Admin> {
        let rt = OwnedRuntime::new("kafka-share-admin")?;
        let admin = rt.block_on(connect())??;
        Ok(Admin { admin, rt })
    }

    /// Runs any call of the async [`super::Admin`] to its end, blocking:
    /// `admin.run(async |a| a.describe_share_groups(&["g"]).await)`.
    pub fn run<T>(&self, call: impl AsyncFnOnce(&super::Admin) -> Result<T>) -> Result<T> {
        self.rt.block_on(call(&self.admin))?
    }

    /// See [`super::Admin::create_topic`] (an existing topic is not an error).
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<()> {
        self.run(async |a| a.create_topic(name, partitions).await)
    }

    /// See [`super::Admin::create_topics`]: one result per topic.
    pub fn create_topics(&self, topics: &[NewTopic]) -> Result<Vec<Result<()>>> {
        self.run(async |a| a.create_topics(topics).await)
    }

    /// See [`super::Admin::delete_topics`]: one result per topic.
    pub fn delete_topics(&self, names: &[&str]) -> Result<Vec<Result<()>>> {
        self.run(async |a| a.delete_topics(names).await)
    }

    /// See [`super::Admin::list_topics`].
    pub fn list_topics(&self) -> Result<Vec<TopicListing>> {
        self.run(async |a| a.list_topics().await)
    }

    /// See [`super::Admin::list_share_groups`].
    pub fn list_share_groups(&self) -> Result<Vec<ShareGroupListing>> {
        self.run(async |a| a.list_share_groups().await)
    }

    /// See [`super::Admin::describe_share_group`].
    pub fn describe_share_group(&self, group: &str) -> Result<ShareGroupDescription> {
        self.run(async |a| a.describe_share_group(group).await)
    }

    /// See [`super::Admin::list_share_group_offsets`].
    pub fn list_share_group_offsets(&self, group: &str, topics: Option<&[&str]>) -> Result<ShareGroupOffsets> {
        self.run(async |a| a.list_share_group_offsets(group, topics).await)
    }

    /// The async client, e.g. to hand to async code that runs elsewhere. Its calls need a
    /// runtime: await them in one, or block on them with [`run`](Self::run).
    pub fn as_async(&self) -> &super::Admin {
        &self.admin
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        // Nothing is pending in an admin client: closing its connections is all there is.
        // (The runtime, dropped next, stops without blocking inside an async runtime.)
        self.admin.close();
    }
}
