//! KEDA's external scaler (`externalscaler.ExternalScaler`, gRPC) over the exporter's cache:
//! `IsActive`, `StreamIsActive`, `GetMetricSpec`, `GetMetrics` answer from the last refresh,
//! never from the cluster.
//!
//! Scaler metadata: `group` (required), `topic` (optional: that topic's partitions only),
//! `lagThreshold` (records per replica, default 10), `ageThresholdSeconds` (optional: a second
//! metric, the age of the oldest unacknowledged record, seconds per replica),
//! `activationLagThreshold` (active above it, default 0), `bootstrapServers` (accepted; the
//! exporter answers for the cluster it is connected to).

mod metadata;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

pub use metadata::DEFAULT_LAG_THRESHOLD;
use metadata::{Missing, Query};

use super::shown;

use super::snapshot::Snapshot;
use crate::error::{Error, Result};

/// The code generated from KEDA's `externalscaler.proto` (server and client), for tests and
/// for applications that want to call a scaler.
#[allow(missing_docs, clippy::all, clippy::pedantic, unreachable_pub)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/externalscaler.rs"));
}

use proto::external_scaler_server::{ExternalScaler, ExternalScalerServer};
use proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec, MetricValue,
    ScaledObjectRef,
};

/// The scaler service over an exporter's snapshots ([`Exporter::subscribe`](super::Exporter::subscribe)).
#[derive(Debug, Clone)]
pub struct Scaler {
    snapshots: watch::Receiver<Arc<Snapshot>>,
}

impl Scaler {
    /// A scaler reading `snapshots`.
    pub fn new(snapshots: watch::Receiver<Arc<Snapshot>>) -> Scaler {
        Scaler { snapshots }
    }

    fn query(r: &ScaledObjectRef) -> std::result::Result<Query, Status> {
        Query::from_metadata(&r.scaler_metadata).map_err(|e| Status::invalid_argument(e.0))
    }

    fn read(&self, q: &Query) -> std::result::Result<(f64, f64), Status> {
        let s = self.snapshots.borrow().clone();
        q.read(&s, SystemTime::now()).map_err(|m| missing(q, m))
    }
}

/// "12 s ago" / "never since the exporter started".
fn ago(t: Option<SystemTime>, now: SystemTime) -> String {
    match t {
        Some(t) => format!("{:.0} s ago", now.duration_since(t).unwrap_or_default().as_secs_f64()),
        None => "never since the exporter started".to_string(),
    }
}

/// A query's missing value as the gRPC status KEDA acts on: UNAVAILABLE (KEDA keeps the
/// replica count and applies the ScaledObject's fallback) whenever the backlog is unknown,
/// NOT_FOUND only when the cluster said the group does not exist.
fn missing(q: &Query, m: Missing) -> Status {
    let now = SystemTime::now();
    match m {
        Missing::NotYet => Status::unavailable("the exporter has not finished its first refresh; ask again shortly"),
        Missing::Unread { cause, last_read } => Status::unavailable(format!(
            "the backlog of share group {} could not be read at the exporter's last refresh ({cause}); last read {}",
            shown(&q.group),
            ago(last_read, now)
        )),
        Missing::Unlisted { cause, last_success } => Status::unavailable(format!(
            "the share groups could not be listed at the exporter's last refresh ({cause}), so share group {} is \
             unknown; last successful refresh {}",
            shown(&q.group),
            ago(last_success, now)
        )),
        Missing::NoGroup => Status::not_found(format!(
            "share group {} was not found at the exporter's last refresh: check the name, that the group exists, \
             and that --group/--group-pattern admit it",
            shown(&q.group)
        )),
        Missing::NoTopic => Status::not_found(format!(
            "share group {} has no share state on topic {}: check the topic, or leave it out",
            shown(&q.group),
            shown(q.topic.as_deref().unwrap_or_default())
        )),
    }
}

type ActiveStream = Pin<Box<dyn Stream<Item = std::result::Result<IsActiveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ExternalScaler for Scaler {
    async fn is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> std::result::Result<Response<IsActiveResponse>, Status> {
        let q = Self::query(request.get_ref())?;
        let (lag, _) = self.read(&q)?;
        Ok(Response::new(IsActiveResponse { result: q.is_active(lag) }))
    }

    type StreamIsActiveStream = ActiveStream;

    /// One answer after the first refresh, then one per refresh whose answer differs, until
    /// KEDA hangs up. A group or topic not found answers inactive here (not an error, which
    /// would end the stream). A group whose backlog could not be read answers nothing until
    /// it is read again: KEDA keeps what the stream said last.
    async fn stream_is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> std::result::Result<Response<Self::StreamIsActiveStream>, Status> {
        let q = Self::query(request.get_ref())?;
        let mut rx = self.snapshots.clone();
        rx.mark_changed();
        let stream = futures::stream::unfold((rx, q, None::<bool>), |(mut rx, q, last)| async move {
            loop {
                // The exporter stopped: the stream ends.
                rx.changed().await.ok()?;
                let s = rx.borrow_and_update().clone();
                match q.read(&s, SystemTime::now()) {
                    Ok((lag, _)) => {
                        let active = q.is_active(lag);
                        if last != Some(active) {
                            return Some((Ok(IsActiveResponse { result: active }), (rx, q, Some(active))));
                        }
                    }
                    // Unknown: nothing derived from a backlog not read.
                    Err(Missing::NotYet | Missing::Unread { .. } | Missing::Unlisted { .. }) => {}
                    // An error would end the stream (gRPC ends a stream with its status), and
                    // a group that does not exist yet has no work: inactive until it appears.
                    // IsActive and GetMetrics say NotFound, for the operator to see.
                    Err(Missing::NoGroup | Missing::NoTopic) => {
                        if last != Some(false) {
                            return Some((Ok(IsActiveResponse { result: false }), (rx, q, Some(false))));
                        }
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> std::result::Result<Response<GetMetricSpecResponse>, Status> {
        let q = Self::query(request.get_ref())?;
        let spec = |name: String, target: f64| MetricSpec {
            metric_name: name,
            target_size: target.ceil() as i64,
            target_size_float: target,
        };
        let mut metric_specs = vec![spec(q.lag_metric(), q.lag_threshold)];
        if let Some(age) = q.age_threshold_seconds {
            metric_specs.push(spec(q.age_metric(), age));
        }
        Ok(Response::new(GetMetricSpecResponse { metric_specs }))
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> std::result::Result<Response<GetMetricsResponse>, Status> {
        let r = request.get_ref();
        let Some(obj) = &r.scaled_object_ref else {
            return Err(Status::invalid_argument("GetMetrics needs scaledObjectRef with the scaler metadata"));
        };
        let q = Self::query(obj)?;
        let (lag, age) = self.read(&q)?;
        // KEDA asks by the name GetMetricSpec gave, sometimes prefixed (`s0-`).
        let value = if r.metric_name.ends_with(&q.age_metric()) && q.age_threshold_seconds.is_some() {
            age
        } else if r.metric_name.ends_with(&q.lag_metric()) || r.metric_name.is_empty() {
            lag
        } else {
            return Err(Status::not_found(format!(
                "metric {} is not one this scaler gave: use {} or {}",
                shown(&r.metric_name),
                shown(&q.lag_metric()),
                shown(&q.age_metric())
            )));
        };
        Ok(Response::new(GetMetricsResponse {
            metric_values: vec![MetricValue {
                metric_name: r.metric_name.clone(),
                metric_value: value.round() as i64,
                metric_value_float: value,
            }],
        }))
    }
}

/// A running scaler endpoint ([`serve_scaler`]); dropping it stops the server.
#[derive(Debug)]
pub struct ScalerEndpoint {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ScalerEndpoint {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ScalerEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves the scaler over gRPC (plain HTTP/2, as KEDA's external scalers are reached in a
/// cluster) on `addr`; port 0 picks a free port (see [`ScalerEndpoint::local_addr`]).
///
/// # Errors
/// [`Error::Config`] when the address cannot be resolved or bound.
pub async fn serve_scaler(addr: &str, scaler: Scaler) -> Result<ScalerEndpoint> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::config("scaler address", format!("cannot listen on {addr}: {e}; pick another port or address"))
    })?;
    let local = listener.local_addr().map_err(|e| Error::config("scaler address", e.to_string()))?;
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let task = tokio::spawn(async move {
        let r = tonic::transport::Server::builder()
            .add_service(ExternalScalerServer::new(scaler))
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "the KEDA scaler server stopped");
        }
    });
    Ok(ScalerEndpoint { addr: local, task })
}
