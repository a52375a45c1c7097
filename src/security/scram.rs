//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), client side, as a sans-IO state
//! machine: [`ScramClient::client_first`] -> server-first into
//! [`ScramClient::handle_server_first`] -> client-final -> server-final into
//! [`ScramClient::handle_server_final`]. Each message is the `auth_bytes` of one
//! SaslAuthenticate request or response.
//!
//! What keeps it safe: the server's nonce must extend ours (a replayed or foreign
//! server-first is refused), the iteration count is bounded both ways (Kafka refuses fewer
//! than 4096; a huge count from a hostile server would burn CPU for minutes), and the
//! server's signature is verified, so a server that does not know the password cannot pass
//! as the broker. No channel binding (`n,,`), as in every Kafka client.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::{auth_failed, Secret};
use crate::error::{Error, Result};

/// Kafka's minimum iteration count (`ScramMechanism.minIterations`).
pub const MIN_ITERATIONS: u32 = 4096;
/// The largest iteration count we compute: Kafka stores at most 16384; the head room is for
/// other servers, the bound for hostile ones (a million SHA-512 rounds take about a second).
pub const MAX_ITERATIONS: u32 = 1_000_000;

/// `base64("n,,")`: the gs2 header echoed in the client-final message.
const GS2_HEADER_B64: &str = "biws";

/// The SCRAM hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256
    Sha256,
    /// SCRAM-SHA-512
    Sha512,
}

impl ScramMechanism {
    /// The mechanism name as SaslHandshake and `sasl.mechanism` spell it.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Result<Vec<u8>> {
        // HMAC takes keys of any length; the error branch exists only in the type.
        let bad_key = |_| auth_failed(self.name(), "HMAC key rejected");
        Ok(match self {
            ScramMechanism::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(bad_key)?;
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).map_err(bad_key)?;
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        })
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this HMAC, one hash length of output.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec(),
            ScramMechanism::Sha512 => pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec(),
        }
    }
}

/// The keys and signatures both sides derive from the salted password and the auth message
/// (RFC 5802 section 3); the tests use it to play the server.
struct Proofs {
    client_proof: Vec<u8>,
    server_signature: Vec<u8>,
}

fn proofs(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
    auth_message: &[u8],
) -> Result<Proofs> {
    let salted = mechanism.salted_password(password, salt, iterations);
    let client_key = mechanism.hmac(&salted, b"Client Key")?;
    let stored_key = mechanism.hash(&client_key);
    let client_signature = mechanism.hmac(&stored_key, auth_message)?;
    let client_proof = client_key.iter().zip(&client_signature).map(|(k, s)| k ^ s).collect();
    let server_key = mechanism.hmac(&salted, b"Server Key")?;
    let server_signature = mechanism.hmac(&server_key, auth_message)?;
    Ok(Proofs { client_proof, server_signature })
}

/// A user name as SCRAM writes it: `=` -> `=3D`, `,` -> `=2C`.
pub fn escape_username(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// A nonce of 32 random alphanumerics (about 190 bits) from the thread's CSPRNG.
pub fn random_nonce() -> String {
    use rand::distributions::Alphanumeric;
    use rand::Rng;
    rand::thread_rng().sample_iter(&Alphanumeric).take(32).map(char::from).collect()
}

enum State {
    Initial,
    AwaitServerFirst,
    AwaitServerFinal {
        server_signature: Vec<u8>,
    },
    Done,
    /// A step failed: the exchange cannot go on; start a new one on a new login.
    Failed,
}

/// The client side of one SCRAM exchange.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: Secret,
    nonce: String,
    client_first_bare: String,
    state: State,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient").field("mechanism", &self.mechanism).finish_non_exhaustive()
    }
}

impl ScramClient {
    /// A new exchange with a fresh random nonce.
    pub fn new(mechanism: ScramMechanism, user: &str, password: Secret) -> ScramClient {
        Self::build(mechanism, user, password, random_nonce())
    }

    /// A new exchange with the given nonce (tests, known-answer vectors). The nonce must be
    /// printable ASCII without `,`.
    pub fn with_nonce(mechanism: ScramMechanism, user: &str, password: Secret, nonce: &str) -> Result<ScramClient> {
        if nonce.is_empty() || !nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',') {
            return Err(Error::InvalidArgument(
                "a SCRAM nonce must be non-empty printable ASCII without ','".to_string(),
            ));
        }
        Ok(Self::build(mechanism, user, password, nonce.to_string()))
    }

    fn build(mechanism: ScramMechanism, user: &str, password: Secret, nonce: String) -> ScramClient {
        let client_first_bare = format!("n={},r={nonce}", escape_username(user));
        ScramClient { mechanism, password, nonce, client_first_bare, state: State::Initial }
    }

    /// The mechanism of this exchange.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Whether the server's signature was verified: the login succeeded.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn fail(&mut self, message: impl std::fmt::Display) -> Error {
        self.state = State::Failed;
        auth_failed(self.mechanism.name(), message)
    }

    /// The client-first message: `n,,n=<user>,r=<nonce>`.
    pub fn client_first(&mut self) -> Vec<u8> {
        self.state = State::AwaitServerFirst;
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Takes the server-first message (`r=<nonce>,s=<salt>,i=<iterations>`) and returns the
    /// client-final message with the proof.
    pub fn handle_server_first(&mut self, message: &[u8]) -> Result<Vec<u8>> {
        if !matches!(self.state, State::AwaitServerFirst) {
            return Err(self.fail("server-first message out of order (send client_first first, once)"));
        }
        let Ok(text) = std::str::from_utf8(message) else {
            return Err(self.fail("the server-first message is not UTF-8"));
        };
        let mut fields = text.split(',');
        let nonce = match fields.next() {
            Some(f) if f.starts_with("m=") => {
                return Err(self.fail("the server requires a SCRAM extension (m=) this client does not support"));
            }
            Some(f) => f.strip_prefix("r="),
            None => None,
        };
        let salt = fields.next().and_then(|f| f.strip_prefix("s="));
        let iterations = fields.next().and_then(|f| f.strip_prefix("i="));
        // Anything after i= is an extension, which RFC 5802 lets us ignore.
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(self.fail(format!("malformed server-first message (expected r=..,s=..,i=..): {}", shown(text))));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(self.fail("the server's nonce does not extend the client's (replayed or foreign message)"));
        }
        if !nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(self.fail("the server's nonce holds non-printable characters"));
        }
        let salt = match BASE64.decode(salt) {
            Ok(s) if !s.is_empty() => s,
            _ => return Err(self.fail("the server's salt is not valid base64")),
        };
        let iterations =
            match iterations.parse::<u32>() {
                Ok(n) if n < MIN_ITERATIONS => {
                    return Err(self
                        .fail(format!("the server asks for {n} iterations, fewer than the minimum {MIN_ITERATIONS}")))
                }
                Ok(n) if n > MAX_ITERATIONS => {
                    return Err(self
                        .fail(format!("the server asks for {n} iterations, more than the maximum {MAX_ITERATIONS}")))
                }
                Ok(n) => n,
                Err(_) => return Err(self.fail("the server's iteration count is not a number")),
            };
        let without_proof = format!("c={GS2_HEADER_B64},r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let p =
            match proofs(self.mechanism, self.password.expose().as_bytes(), &salt, iterations, auth_message.as_bytes())
            {
                Ok(p) => p,
                Err(e) => {
                    self.state = State::Failed;
                    return Err(e);
                }
            };
        self.state = State::AwaitServerFinal { server_signature: p.server_signature };
        Ok(format!("{without_proof},p={}", BASE64.encode(p.client_proof)).into_bytes())
    }

    /// Takes the server-final message: `v=<signature>` must match what the password gives;
    /// `e=<error>` is the server refusing the login.
    pub fn handle_server_final(&mut self, message: &[u8]) -> Result<()> {
        let State::AwaitServerFinal { server_signature } = std::mem::replace(&mut self.state, State::Failed) else {
            return Err(self.fail("server-final message out of order (handle the server-first message first)"));
        };
        let Ok(text) = std::str::from_utf8(message) else {
            return Err(self.fail("the server-final message is not UTF-8"));
        };
        let first = text.split(',').next().unwrap_or_default();
        if let Some(error) = first.strip_prefix("e=") {
            return Err(self.fail(format!("the server refused the login: {}", shown(error))));
        }
        let Some(verifier) = first.strip_prefix("v=") else {
            return Err(self.fail(format!("malformed server-final message (expected v=.. or e=..): {}", shown(text))));
        };
        match BASE64.decode(verifier) {
            Ok(v) if constant_time_eq(&v, &server_signature) => {
                self.state = State::Done;
                Ok(())
            }
            Ok(_) => Err(self.fail(
                "the server's signature is wrong: it does not know this user's credentials; it may not be the broker",
            )),
            Err(_) => Err(self.fail("the server's signature is not valid base64")),
        }
    }
}

/// Server text for an error message: printable ASCII only, at most 200 characters. Server
/// messages carry no secret of ours (the proof is not in them).
fn shown(text: &str) -> String {
    let clean: String =
        text.chars().take(200).map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
    format!("{clean:?}")
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
