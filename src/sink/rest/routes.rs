//! Connect's paths and methods to calls on the [`Herder`], and their answers: status codes
//! and JSON bodies as Connect gives them. Routing is a pure function of method, path and
//! query (unit-tested here); the HTTP server (`server.rs`) only moves bytes.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::bodies;
use super::error::RestError;
use super::herder::Herder;
use super::store::TargetState;
use super::validate::validate_with_cluster;

/// One call of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Root,
    Plugins,
    Validate(String),
    List { status: bool, info: bool },
    Create,
    Info(String),
    Config(String),
    PutConfig(String),
    PatchConfig(String),
    Status(String),
    Tasks(String),
    TaskStatus(String, usize),
    TaskRestart(String, usize),
    Pause(String),
    Resume(String),
    Stop(String),
    Restart { name: String, include_tasks: bool, only_failed: bool },
    Delete(String),
}

/// An answer: status code and body (none for 202 / 204).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Option<Value>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply { status, body: Some(body) }
    }

    fn empty(status: u16) -> Reply {
        Reply { status, body: None }
    }
}

impl From<RestError> for Reply {
    fn from(e: RestError) -> Reply {
        Reply::json(e.status(), e.body())
    }
}

/// `%XX` escapes decoded (a connector name may hold any character); `None` if not UTF-8.
fn decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn query_values<'a>(query: Option<&'a str>, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    query
        .unwrap_or("")
        .split('&')
        .filter_map(move |kv| kv.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
}

fn not_found() -> RestError {
    RestError::NoRoute { status: 404, message: "Not Found" }
}

fn not_allowed() -> RestError {
    RestError::NoRoute { status: 405, message: "Method Not Allowed" }
}

/// The call `method path?query` makes.
pub(crate) fn route(method: &str, path: &str, query: Option<&str>) -> Result<Route, RestError> {
    let segments: Vec<String> =
        path.split('/').filter(|s| !s.is_empty()).map(decode).collect::<Option<_>>().ok_or_else(not_found)?;
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    let one = |want: &str, r: Route| if method == want { Ok(r) } else { Err(not_allowed()) };
    match s.as_slice() {
        [] => one("GET", Route::Root),
        ["connector-plugins"] => one("GET", Route::Plugins),
        ["connector-plugins", class, "config", "validate"] => one("PUT", Route::Validate(class.to_string())),
        ["connectors"] => match method {
            "GET" => {
                let expand: Vec<&str> = query_values(query, "expand").collect();
                Ok(Route::List { status: expand.contains(&"status"), info: expand.contains(&"info") })
            }
            "POST" => Ok(Route::Create),
            _ => Err(not_allowed()),
        },
        ["connectors", name] => match method {
            "GET" => Ok(Route::Info(name.to_string())),
            "DELETE" => Ok(Route::Delete(name.to_string())),
            _ => Err(not_allowed()),
        },
        ["connectors", name, "config"] => match method {
            "GET" => Ok(Route::Config(name.to_string())),
            "PUT" => Ok(Route::PutConfig(name.to_string())),
            "PATCH" => Ok(Route::PatchConfig(name.to_string())),
            _ => Err(not_allowed()),
        },
        ["connectors", name, "status"] => one("GET", Route::Status(name.to_string())),
        ["connectors", name, "tasks"] => one("GET", Route::Tasks(name.to_string())),
        ["connectors", name, "tasks", id, "status"] => {
            one("GET", Route::TaskStatus(name.to_string(), id.parse().map_err(|_| not_found())?))
        }
        ["connectors", name, "tasks", id, "restart"] => {
            one("POST", Route::TaskRestart(name.to_string(), id.parse().map_err(|_| not_found())?))
        }
        ["connectors", name, "pause"] => one("PUT", Route::Pause(name.to_string())),
        ["connectors", name, "resume"] => one("PUT", Route::Resume(name.to_string())),
        ["connectors", name, "stop"] => one("PUT", Route::Stop(name.to_string())),
        ["connectors", name, "restart"] => {
            let include_tasks = query_values(query, "includeTasks").any(|v| v == "true");
            let only_failed = query_values(query, "onlyFailed").any(|v| v == "true");
            one("POST", Route::Restart { name: name.to_string(), include_tasks, only_failed })
        }
        _ => Err(not_found()),
    }
}

/// A JSON object of settings: strings, or numbers and booleans taken as their text (as
/// Connect's JSON reader takes them).
fn settings(v: &Value) -> Result<BTreeMap<String, String>, RestError> {
    let obj = v.as_object().ok_or_else(|| bad("the config must be a JSON object of settings"))?;
    obj.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            Value::Number(n) => Ok((k.clone(), n.to_string())),
            Value::Bool(b) => Ok((k.clone(), b.to_string())),
            other => Err(bad(&format!("{k}: {other} is not a setting value: use a string, number or boolean"))),
        })
        .collect()
}

fn bad(message: &str) -> RestError {
    RestError::BadRequest { message: message.to_string() }
}

fn body_json(body: &[u8]) -> Result<Value, RestError> {
    serde_json::from_slice(body).map_err(|e| bad(&format!("the body is not valid JSON: {e}")))
}

/// What the server knows of itself.
pub(crate) struct Context<'a> {
    pub(crate) herder: &'a Herder,
    /// host:port of the listener (Connect's worker id).
    pub(crate) worker_id: &'a str,
    pub(crate) cluster_id: Option<&'a str>,
}

/// Runs `route` and answers as Connect does.
pub(crate) async fn handle(cx: &Context<'_>, route: Route, body: &[u8]) -> Result<Reply, RestError> {
    let h = cx.herder;
    Ok(match route {
        Route::Root => Reply::json(
            200,
            json!({"version": env!("CARGO_PKG_VERSION"), "commit": "", "kafka_cluster_id": cx.cluster_id}),
        ),
        Route::Plugins => {
            let plugins: Vec<Value> = h
                .worker()
                .registry()
                .classes()
                .map(|c| json!({"class": c, "type": "sink", "version": env!("CARGO_PKG_VERSION")}))
                .collect();
            Reply::json(200, Value::Array(plugins))
        }
        Route::Validate(class) => {
            let config = settings(&body_json(body)?)?;
            Reply::json(200, validate_with_cluster(h.worker(), &class, config).await.map_err(|m| bad(&m))?)
        }
        Route::List { status, info } => {
            let names = h.names().await;
            if !status && !info {
                return Ok(Reply::json(200, json!(names)));
            }
            let mut parts = Vec::new();
            for n in names {
                // A connector deleted meanwhile is left out, as if listed a moment later.
                let s = match status {
                    true => h.status(&n).await.ok().map(|s| bodies::status(&s, cx.worker_id)),
                    false => None,
                };
                let i = match info {
                    true => h.info(&n).await.ok().map(|i| bodies::info(&i)),
                    false => None,
                };
                if s.is_some() || i.is_some() {
                    parts.push((n, s, i));
                }
            }
            Reply::json(200, bodies::expanded(parts))
        }
        Route::Create => {
            let v = body_json(body)?;
            let config = settings(v.get("config").ok_or_else(|| bad("the body needs a \"config\" object"))?)?;
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .or_else(|| config.get("name").map(String::as_str))
                .filter(|n| !n.trim().is_empty())
                .ok_or_else(|| bad("Connector name must be specified: give \"name\""))?
                .to_string();
            let initial = match v.get("initial_state").and_then(Value::as_str) {
                None => None,
                Some(s) => Some(
                    TargetState::parse(s)
                        .ok_or_else(|| bad(&format!("initial_state {s:?}: use RUNNING, PAUSED or STOPPED")))?,
                ),
            };
            Reply::json(201, bodies::info(&h.create(&name, config, initial).await?))
        }
        Route::Info(n) => Reply::json(200, bodies::info(&h.info(&n).await?)),
        Route::Config(n) => Reply::json(200, json!(h.config(&n).await?)),
        Route::PutConfig(n) => {
            let (info, created) = h.put_config(&n, settings(&body_json(body)?)?).await?;
            Reply::json(if created { 201 } else { 200 }, bodies::info(&info))
        }
        Route::PatchConfig(n) => {
            let v = body_json(body)?;
            let obj = v.as_object().ok_or_else(|| bad("the patch must be a JSON object of settings"))?;
            let mut patch = BTreeMap::new();
            for (k, x) in obj {
                let value = match x {
                    Value::Null => None,
                    x => settings(&json!({ k.clone(): x.clone() }))?.remove(k),
                };
                patch.insert(k.clone(), value);
            }
            Reply::json(200, bodies::info(&h.patch_config(&n, patch).await?))
        }
        Route::Status(n) => Reply::json(200, bodies::status(&h.status(&n).await?, cx.worker_id)),
        Route::Tasks(n) => Reply::json(200, bodies::tasks(&h.info(&n).await?)),
        Route::TaskStatus(n, id) => {
            let status = h.status(&n).await?;
            let task = status.tasks.iter().find(|t| t.id == id).ok_or(RestError::NoTask { name: n, id })?;
            Reply::json(200, bodies::task_status(task, cx.worker_id))
        }
        Route::TaskRestart(n, id) => {
            if !h.status(&n).await?.tasks.iter().any(|t| t.id == id) {
                return Err(RestError::NoTask { name: n, id });
            }
            // The tasks are one engine: restarting one restarts the connector, on this worker
            // alone (each worker runs tasks 0 .. tasks.max of its own).
            h.restart_here(&n, false).await?;
            Reply::empty(204)
        }
        Route::Pause(n) => {
            h.pause(&n).await?;
            Reply::empty(202)
        }
        Route::Resume(n) => {
            h.resume(&n).await?;
            Reply::empty(202)
        }
        Route::Stop(n) => {
            h.stop(&n).await?;
            Reply::empty(204)
        }
        Route::Restart { name, include_tasks, only_failed } => {
            let plan = h.restart(&name, include_tasks, only_failed).await?;
            match include_tasks || only_failed {
                true => Reply::json(202, bodies::status(&plan, cx.worker_id)),
                false => Reply::empty(204),
            }
        }
        Route::Delete(n) => {
            h.delete(&n).await?;
            Reply::empty(204)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(method: &str, path: &str) -> Result<Route, RestError> {
        let (p, q) = match path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path, None),
        };
        route(method, p, q)
    }

    #[test]
    fn connect_paths_route() {
        let n = || "orders".to_string();
        assert_eq!(r("GET", "/"), Ok(Route::Root));
        assert_eq!(r("GET", "/connectors"), Ok(Route::List { status: false, info: false }));
        assert_eq!(r("GET", "/connectors?expand=status"), Ok(Route::List { status: true, info: false }));
        assert_eq!(r("GET", "/connectors?expand=status&expand=info"), Ok(Route::List { status: true, info: true }));
        assert_eq!(r("POST", "/connectors"), Ok(Route::Create));
        assert_eq!(r("GET", "/connectors/orders"), Ok(Route::Info(n())));
        assert_eq!(r("GET", "/connectors/orders/"), Ok(Route::Info(n())));
        assert_eq!(r("DELETE", "/connectors/orders"), Ok(Route::Delete(n())));
        assert_eq!(r("GET", "/connectors/orders/config"), Ok(Route::Config(n())));
        assert_eq!(r("PUT", "/connectors/orders/config"), Ok(Route::PutConfig(n())));
        assert_eq!(r("PATCH", "/connectors/orders/config"), Ok(Route::PatchConfig(n())));
        assert_eq!(r("GET", "/connectors/orders/status"), Ok(Route::Status(n())));
        assert_eq!(r("GET", "/connectors/orders/tasks"), Ok(Route::Tasks(n())));
        assert_eq!(r("GET", "/connectors/orders/tasks/1/status"), Ok(Route::TaskStatus(n(), 1)));
        assert_eq!(r("POST", "/connectors/orders/tasks/0/restart"), Ok(Route::TaskRestart(n(), 0)));
        assert_eq!(r("GET", "/connectors/orders/tasks/x/status").unwrap_err().status(), 404);
        assert_eq!(r("PUT", "/connectors/orders/pause"), Ok(Route::Pause(n())));
        assert_eq!(r("PUT", "/connectors/orders/resume"), Ok(Route::Resume(n())));
        assert_eq!(r("PUT", "/connectors/orders/stop"), Ok(Route::Stop(n())));
        assert_eq!(
            r("POST", "/connectors/orders/restart"),
            Ok(Route::Restart { name: n(), include_tasks: false, only_failed: false })
        );
        assert_eq!(
            r("POST", "/connectors/orders/restart?includeTasks=true&onlyFailed=true"),
            Ok(Route::Restart { name: n(), include_tasks: true, only_failed: true })
        );
        assert_eq!(r("GET", "/connector-plugins"), Ok(Route::Plugins));
        assert_eq!(
            r("PUT", "/connector-plugins/FileStreamSinkConnector/config/validate"),
            Ok(Route::Validate("FileStreamSinkConnector".into()))
        );
        assert_eq!(r("GET", "/connectors/my%20sink"), Ok(Route::Info("my sink".into())));
    }

    #[test]
    fn wrong_paths_and_methods_answer_404_and_405() {
        assert_eq!(r("GET", "/nope").unwrap_err().status(), 404);
        assert_eq!(r("GET", "/connectors/a/b/c").unwrap_err().status(), 404);
        assert_eq!(r("POST", "/connectors/a/pause").unwrap_err().status(), 405);
        assert_eq!(r("PATCH", "/connectors").unwrap_err().status(), 405);
        assert_eq!(r("GET", "/connectors/%ff").unwrap_err().status(), 404);
        // A stray % is kept as it is.
        assert_eq!(r("GET", "/connectors/50%"), Ok(Route::Info("50%".into())));
    }

    #[test]
    fn errors_answer_in_connects_shape() {
        let reply = Reply::from(RestError::NotFound { name: "x".into() });
        assert_eq!(reply.status, 404);
        let body = reply.body.unwrap();
        assert_eq!(body["error_code"], 404);
        assert!(body["message"].as_str().unwrap().starts_with("Connector x not found"));
        assert_eq!(Reply::from(RestError::Conflict { name: "x".into() }).status, 409);
    }

    #[test]
    fn settings_take_scalars_as_text_and_refuse_the_rest() {
        let s = settings(&json!({"a": "x", "tasks.max": 2, "b": true})).unwrap();
        assert_eq!(s.get("tasks.max").map(String::as_str), Some("2"));
        assert_eq!(s.get("b").map(String::as_str), Some("true"));
        assert_eq!(settings(&json!({"a": [1]})).unwrap_err().status(), 400);
        assert_eq!(settings(&json!([1])).unwrap_err().status(), 400);
        assert_eq!(body_json(b"{").unwrap_err().status(), 400);
    }
}
