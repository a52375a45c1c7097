//! The HTTP/1.1 server (hyper) in front of the routes: reads the request and its body
//! (at most [`MAX_BODY`]), answers with the route's status and JSON. Each connection is
//! its own tokio task; dropping the [`RestServer`] stops accepting.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::OnceCell;
use tokio::task::JoinHandle;

use super::error::RestError;
use super::herder::Herder;
use super::routes::{handle, route, Context, Reply};
use crate::admin::Admin;
use crate::error::{Error, Result};

/// The largest request body taken (a connector configuration is a few kB).
pub const MAX_BODY: usize = 1 << 20;

/// Connect's REST API on a [`Herder`]. Dropping it stops the listener (connections in
/// flight finish); the herder's connectors keep running.
#[derive(Debug)]
pub struct RestServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for RestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    herder: Arc<Herder>,
    worker_id: String,
    /// The cluster's id for `GET /`, asked once.
    cluster_id: OnceCell<Option<String>>,
}

impl RestServer {
    /// Serves on `addr` (`127.0.0.1:8083`; port 0 picks a free one, see
    /// [`local_addr`](Self::local_addr)). An address that cannot be listened on is an
    /// [`Error::Config`] on `listeners`.
    pub async fn bind(addr: impl ToSocketAddrs, herder: Arc<Herder>) -> Result<RestServer> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::config("listeners", format!("cannot listen: {e}; pick another port or address")))?;
        let addr = listener.local_addr().map_err(|e| Error::config("listeners", e.to_string()))?;
        let shared = Arc::new(Shared { herder, worker_id: addr.to_string(), cluster_id: OnceCell::new() });
        let task = tokio::spawn(accept(listener, shared));
        Ok(RestServer { addr, task })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors or similar: wait a moment instead of spinning.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&shared, req).await) }
            });
            if let Err(e) =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await
            {
                tracing::debug!("REST connection: {e}");
            }
        });
    }
}

async fn answer(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let reply = match route(&method, &path, query.as_deref()) {
        Err(e) => Reply::from(e),
        Ok(r) => match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Err(e) => Reply::from(RestError::BadRequest {
                message: format!("reading the body: {e} (at most {MAX_BODY} bytes)"),
            }),
            Ok(body) => {
                let cluster_id = match r {
                    super::routes::Route::Root => {
                        shared.cluster_id.get_or_init(|| cluster_id(&shared.herder)).await.as_deref()
                    }
                    _ => None,
                };
                let cx = Context { herder: &shared.herder, worker_id: &shared.worker_id, cluster_id };
                handle(&cx, r, &body.to_bytes()).await.unwrap_or_else(Reply::from)
            }
        },
    };
    tracing::debug!(%method, %path, status = reply.status, "REST call");
    let mut builder = Response::builder().status(reply.status);
    let body = match reply.body {
        Some(v) => {
            builder = builder.header("content-type", "application/json");
            Bytes::from(v.to_string())
        }
        None => Bytes::new(),
    };
    builder.body(Full::new(body)).unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

async fn cluster_id(herder: &Herder) -> Option<String> {
    let config = Admin::config_from_properties(&herder.worker().config().admin_properties()).ok()?;
    let admin = Admin::connect(config).await.ok()?;
    admin.describe_cluster().await.ok().map(|c| c.cluster_id)
}
