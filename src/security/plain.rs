//! SASL/PLAIN (RFC 4616): one message, `authzid NUL user NUL password`, with an empty
//! authzid as Kafka clients send it. Use it only over TLS: the password travels as is.

use super::Secret;

/// The PLAIN initial response: `\0user\0password`.
pub fn initial_response(username: &str, password: &Secret) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + username.len() + password.expose().len());
    out.push(0);
    out.extend_from_slice(username.as_bytes());
    out.push(0);
    out.extend_from_slice(password.expose().as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_nul_user_nul_password() {
        assert_eq!(initial_response("alice", &Secret::new("s3cret")), b"\0alice\0s3cret");
        assert_eq!(initial_response("", &Secret::new("")), b"\0\0");
    }
}
