//! Connect's worker setting `listeners` (`http://HOST:PORT`) to an address to bind.

use crate::error::{Error, Result};

/// The address `listeners` names: `http://:8083` (no host: every interface) is
/// `0.0.0.0:8083`, `http://127.0.0.1:8083` is `127.0.0.1:8083`. One plain-HTTP listener:
/// `https://` and lists are refused with what to write instead.
pub fn listener_address(listeners: &str) -> Result<String> {
    let v = listeners.trim();
    if v.contains(',') {
        return Err(Error::config(
            "listeners",
            format!("{v:?}: this runtime serves one listener; give one http://HOST:PORT"),
        ));
    }
    let Some(rest) = v.strip_prefix("http://") else {
        return Err(Error::config(
            "listeners",
            format!("{v:?}: give http://HOST:PORT (https is not served here; put a TLS proxy in front)"),
        ));
    };
    let rest = rest.trim_end_matches('/');
    match rest.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => {
            Ok(format!("{}:{port}", if host.is_empty() { "0.0.0.0" } else { host }))
        }
        _ => Err(Error::config("listeners", format!("{v:?}: give http://HOST:PORT, e.g. http://127.0.0.1:8083"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_connects_forms() {
        assert_eq!(listener_address("http://:8083").unwrap(), "0.0.0.0:8083");
        assert_eq!(listener_address("http://127.0.0.1:8483/").unwrap(), "127.0.0.1:8483");
        assert_eq!(listener_address("http://[::1]:0").unwrap(), "[::1]:0");
        for bad in ["https://:8443", "http://a:1,http://b:2", "http://host", "127.0.0.1:8083", "http://h:99999"] {
            assert!(listener_address(bad).is_err(), "{bad}");
        }
    }
}
