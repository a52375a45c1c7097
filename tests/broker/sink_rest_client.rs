//! A small HTTP/1.1 client for the REST API tests (ours and Connect's): one request per
//! connection (`Connection: close`), the answer's status and JSON body.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An answer: the status code and the body as JSON (`None` when empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Option<Value>,
}

/// `method path` on `addr` (host:port) with an optional JSON body; panics (the test fails)
/// when the server does not answer within 60 s or answers something that is not HTTP.
pub async fn call(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Answer {
    tokio::time::timeout(Duration::from_secs(60), call_once(addr, method, path, body))
        .await
        .unwrap_or_else(|_| panic!("{method} {path} on {addr}: no answer within 60 s"))
}

/// As `call`, `None` while nothing listens at `addr` (a server still starting).
pub async fn try_call(addr: &str, method: &str, path: &str) -> Option<Answer> {
    match tokio::net::TcpStream::connect(addr).await {
        Ok(_) => Some(call(addr, method, path, None).await),
        Err(_) => None,
    }
}

async fn call_once(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Answer {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    let payload = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    s.write_all(head.as_bytes()).await.expect("write request");
    s.write_all(payload.as_bytes()).await.expect("write body");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.expect("read answer");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{method} {path}: not HTTP: {text}"));
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no status in {head}"));
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    let body = if chunked { dechunk(rest) } else { rest.to_string() };
    let body = match body.trim() {
        "" => None,
        b => Some(serde_json::from_str(b).unwrap_or_else(|e| panic!("{method} {path}: body not JSON ({e}): {b}"))),
    };
    Answer { status, body }
}

/// A chunked body's data (Connect's Jetty answers so).
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Polls `GET path` until `cond` holds for the answer; the last answer otherwise (the
/// caller's assertion then shows it).
pub async fn wait_for(addr: &str, path: &str, what: &str, cond: impl Fn(&Answer) -> bool) -> Answer {
    let end = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let a = call(addr, "GET", path, None).await;
        if cond(&a) {
            return a;
        }
        assert!(tokio::time::Instant::now() < end, "timed out waiting for {what}: last answer {a:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The connector's state in a status answer.
pub fn state(a: &Answer) -> Option<&str> {
    a.body.as_ref()?.get("connector")?.get("state")?.as_str()
}
