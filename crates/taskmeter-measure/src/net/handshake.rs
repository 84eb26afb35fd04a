//! The session handshake of net protocol 2 (receivers/README.md, "The handshake"): who may join
//! a point as a sender. The receiver sends a challenge (the point's nonce and settings), the
//! sender answers with its index and a token, `HMAC-SHA256(secret, ...)` of that nonce; the
//! receiver compares it with the token taskmeter computed for that index (in constant time:
//! `taskmeter_net_protocol::same_token`), and starts every sender together once all have joined.
//! The wire itself (the messages, their constants, the judging of a hello) is the crate
//! taskmeter-net-protocol, which the wasm-thread guest shares; all the cryptography is here: a
//! receiver compares bytes.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use taskmeter_net_protocol::{Challenge, Hello, CHALLENGE_BYTES, INDEX_TAKEN, JOINED, PROTOCOL, WRONG_TOKEN};

/// How long a connection has, from its accept, to complete its hello.
pub const HANDSHAKE: Duration = Duration::from_secs(2);
/// How many handshakes a receiver runs at once; a connection beyond that is closed at once.
pub const MAX_PENDING: u32 = 64;
/// The shortest key `--key-file` accepts.
pub const MIN_KEY_BYTES: usize = 16;
/// The environment variable `net send` takes the session cookie from (neither `ps` nor another
/// user sees a process's environment; its own user can, in `/proc/PID/environ`).
pub const COOKIE_ENV: &str = "TASKMETER_NET_COOKIE";
/// The most `net send` reads of a cookie file or of standard input: a cookie is one short line.
const COOKIE_READ_LIMIT: u64 = 4096;

/// What proves a sender belongs to the session: a key both sides hold, or the cookie
/// `net serve` made.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A new random secret, as a cookie of 32 hexadecimal digits.
    pub fn new_cookie() -> Result<(Secret, String), String> {
        let bytes = random::<16>()?;
        let cookie = hex(&bytes);
        Ok((Secret(cookie.clone().into_bytes()), cookie))
    }

    /// The cookie `net send` was given, from `source` (said in an error, which never shows the
    /// cookie, right or wrong: a cookie off by one digit is nearly the secret).
    pub fn cookie(text: &str, source: &str) -> Result<Secret, String> {
        let text = text.trim();
        let wrong = if text.is_empty() {
            "it is empty".to_string()
        } else if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            "it holds characters other than hexadecimal digits".to_string()
        } else if text.len() != 32 {
            format!("it has {} digits", text.len())
        } else {
            return Ok(Secret(text.to_ascii_lowercase().into_bytes()));
        };
        Err(format!("the session cookie from {source} is not the 32 hexadecimal digits `net serve` prints: {wrong}"))
    }

    /// The cookie on the first line of `path` (`net send --cookie-file`).
    pub fn cookie_file(path: &Path) -> Result<Secret, String> {
        let file =
            std::fs::File::open(path).map_err(|e| format!("cannot read the cookie file {}: {e}", path.display()))?;
        let line = first_line(std::io::BufReader::new(file))
            .map_err(|e| format!("cannot read the cookie file {}: {e}", path.display()))?;
        Secret::cookie(&line, &format!("the file {}", path.display()))
    }

    /// The cookie on the first line of standard input (`net send --cookie -`).
    pub fn cookie_stdin() -> Result<Secret, String> {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() {
            taskmeter_console::errln!("taskmeter net send: type the session cookie `net serve` printed, then Enter");
        }
        let line = first_line(std::io::stdin().lock())
            .map_err(|e| format!("cannot read the session cookie from standard input: {e}"))?;
        Secret::cookie(&line, "standard input")
    }

    /// The cookie in [`COOKIE_ENV`], if it is set and not empty.
    pub fn cookie_env() -> Option<Result<Secret, String>> {
        let value = std::env::var_os(COOKIE_ENV).filter(|v| !v.is_empty())?;
        Some(Secret::cookie(value.to_str().unwrap_or("\u{fffd}"), COOKIE_ENV))
    }

    /// The key in `path` (its bytes as they are), at least [`MIN_KEY_BYTES`] long.
    pub fn key_file(path: &Path) -> Result<Secret, String> {
        let key = std::fs::read(path).map_err(|e| format!("cannot read the key file {}: {e}", path.display()))?;
        if key.len() < MIN_KEY_BYTES {
            return Err(format!("the key file {} holds {} bytes; a key needs at least {MIN_KEY_BYTES} (e.g. `head -c 32 /dev/urandom > {}`)", path.display(), key.len(), path.display()));
        }
        Ok(Secret(key))
    }

    /// The token of sender `index` for this nonce and these settings.
    pub fn token(&self, nonce: &[u8; 32], index: u32, connections: u32, message_size: u32) -> [u8; 32] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(b"taskmeter net 2");
        mac.update(nonce);
        for n in [index, connections, message_size] {
            mac.update(&n.to_le_bytes());
        }
        mac.finalize().into_bytes().into()
    }
}

/// The first line of `reader`, as text: up to its newline (a terminal's Enter) or the end, at
/// most [`COOKIE_READ_LIMIT`] bytes.
fn first_line(reader: impl std::io::BufRead) -> std::io::Result<String> {
    use std::io::BufRead;
    let mut bytes = Vec::new();
    reader.take(COOKIE_READ_LIMIT).read_until(b'\n', &mut bytes)?;
    // Not text: no cookie either; the cookie's check says so without showing the bytes.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A receiver's plan for one point: a new nonce, and every sender's token for it.
pub fn plan(secret: &Secret, connections: u32, message_size: usize) -> Result<taskmeter_model::net::NetPlan, String> {
    let nonce = random::<32>()?;
    let size = u32::try_from(message_size).map_err(|_| "a message size above 4 GiB".to_string())?;
    Ok(taskmeter_model::net::NetPlan {
        protocol: PROTOCOL,
        connections,
        message_size,
        handshake_ms: HANDSHAKE.as_millis() as u64,
        max_pending: MAX_PENDING,
        nonce: hex(&nonce),
        tokens: (0..connections).map(|i| hex(&secret.token(&nonce, i, connections, size))).collect(),
    })
}

/// `N` random bytes from the kernel.
pub fn random<const N: usize>() -> Result<[u8; N], String> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| format!("no random bytes from the kernel: {e}"))?;
    Ok(bytes)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a sender could not join.
#[derive(Debug, PartialEq)]
pub enum JoinError {
    /// Nothing came (closed, reset, or no challenge in time): worth connecting again while the
    /// deadline allows, the receiver may be busy with strangers or not listening yet; the line
    /// to show if it never comes.
    Again(String),
    /// The receiver refused or cannot be joined: the one line to show.
    Refused(String),
}

/// A sender's side: reads the challenge, checks it is a taskmeter receiver expecting this point,
/// sends its hello and waits (until `deadline`) for the verdict that starts the point.
pub fn join(
    stream: &mut TcpStream,
    secret: &Secret,
    index: u32,
    connections: u32,
    message_size: u32,
    deadline: Instant,
) -> Result<(), JoinError> {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "the receiver".into());
    // A receiver sends its challenge at once: one that has not within two handshakes' time is
    // something else (an HTTP server waiting for a request).
    let mut bytes = [0u8; CHALLENGE_BYTES];
    let challenge = match read_full(stream, &mut bytes, deadline.min(Instant::now() + 2 * HANDSHAKE)) {
        Ok(()) => {
            Challenge::from_bytes(&bytes).ok_or_else(|| JoinError::Refused(not_a_receiver(&peer, &bytes, None)))?
        }
        // Nothing yet: closed (busy with strangers, or a receiver of the previous point), or
        // still in a full accept queue: worth connecting again while the deadline allows.
        Err((0, e)) => return Err(JoinError::Again(not_a_receiver(&peer, &[], Some(e)))),
        Err((got, e)) => return Err(JoinError::Refused(not_a_receiver(&peer, &bytes[..got], Some(e)))),
    };
    if (challenge.connections, challenge.message_size) != (connections, message_size) {
        return Err(JoinError::Refused(format!(
            "the receiver at {peer} expects {} senders of {}-byte messages; this point has {connections} of {message_size}-byte messages (give net send and net serve the same --senders and --message-size)",
            challenge.connections,
            challenge.message_size
        )));
    }
    let hello = Hello { index, token: secret.token(&challenge.nonce, index, connections, message_size) }.to_bytes();
    stream
        .write_all(&hello)
        .map_err(|e| JoinError::Refused(format!("sender {index}: cannot send its hello to {peer}: {e}")))?;
    let mut verdict = [0u8; 8];
    match read_full(stream, &mut verdict, deadline) {
        Ok(()) if &verdict == JOINED => Ok(()),
        Ok(()) if &verdict == WRONG_TOKEN => Err(JoinError::Refused(format!("the receiver at {peer} refused sender {index}: wrong cookie or key"))),
        Ok(()) if &verdict == INDEX_TAKEN => Err(JoinError::Refused(format!("the receiver at {peer} refused sender {index}: another sender {index} has joined (is a second net send running?)"))),
        Ok(()) => Err(JoinError::Refused(format!("the receiver at {peer} answered sender {index} with {:?}, not a verdict", String::from_utf8_lossy(&verdict)))),
        Err((_, e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            Err(JoinError::Refused(format!("sender {index} joined {peer}, but the point did not start in time (did every sender join?)")))
        }
        Err((_, e)) => Err(JoinError::Refused(format!("the receiver at {peer} closed sender {index}'s connection during the handshake ({e})"))),
    }
}

fn not_a_receiver(peer: &str, got: &[u8], error: Option<std::io::Error>) -> String {
    if got.is_empty() {
        let why = error.map(|e| format!(" ({e})")).unwrap_or_default();
        return format!("{peer} sent no taskmeter challenge{why}: it is not a taskmeter receiver, or it hangs");
    }
    let shown: String = String::from_utf8_lossy(&got[..got.len().min(24)])
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect();
    format!("{peer} is not a taskmeter receiver: it answered {shown:?}")
}

/// Fills `buffer` by `deadline`, in waits of at most 100 ms so that a signal is seen; on failure,
/// how many bytes came and why (`TimedOut` past the deadline or on a signal, `UnexpectedEof`).
pub(crate) fn read_full(
    stream: &mut TcpStream,
    buffer: &mut [u8],
    deadline: Instant,
) -> Result<(), (usize, std::io::Error)> {
    let mut got = 0;
    while got < buffer.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || crate::process::signals::interrupted() {
            return Err((got, std::io::ErrorKind::TimedOut.into()));
        }
        let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(100))));
        match stream.read(&mut buffer[got..]) {
            Ok(0) => return Err((got, std::io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err((got, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_rfc_4231s_hmac_sha256_of_the_documented_message() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // The token is that HMAC over "taskmeter net 2", the nonce, then i, connections and
        // message size as u32 little-endian.
        let secret = Secret(b"Jefe".to_vec());
        let nonce = [7u8; 32];
        let mut message = b"taskmeter net 2".to_vec();
        message.extend_from_slice(&nonce);
        for n in [1u32, 4, 1024] {
            message.extend_from_slice(&n.to_le_bytes());
        }
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(&message);
        assert_eq!(secret.token(&nonce, 1, 4, 1024), <[u8; 32]>::from(mac.finalize().into_bytes()));
        assert_ne!(secret.token(&nonce, 0, 4, 1024), secret.token(&nonce, 1, 4, 1024), "one token per sender");
        assert_ne!(secret.token(&[8u8; 32], 1, 4, 1024), secret.token(&nonce, 1, 4, 1024), "one token per nonce");
    }

    #[test]
    fn cookies_are_32_hex_digits() {
        let (_, cookie) = Secret::new_cookie().unwrap();
        assert_eq!(cookie.len(), 32);
        assert!(Secret::cookie(&cookie, "here").is_ok());
        assert!(Secret::cookie("xyz", "here").is_err());
        assert_eq!(
            Secret::cookie(&cookie.to_uppercase(), "here").unwrap().0,
            Secret::cookie(&cookie, "here").unwrap().0
        );
    }

    #[test]
    fn a_wrong_cookie_is_said_without_its_value() {
        let (_, cookie) = Secret::new_cookie().unwrap();
        for (text, why) in [
            (&cookie[..31], "it has 31 digits"),
            (&format!("{cookie}0")[..], "it has 33 digits"),
            (&format!("{}z", &cookie[..31])[..], "other than hexadecimal digits"),
            ("  ", "it is empty"),
        ] {
            let error = Secret::cookie(text, "the file c").err().unwrap();
            assert!(
                error.starts_with("the session cookie from the file c is not the 32 hexadecimal digits"),
                "{error}"
            );
            assert!(error.contains(why), "{error}");
            assert!(!error.contains(&cookie[..8]), "the value is never shown: {error}");
        }
    }

    #[test]
    fn a_cookie_file_gives_its_first_line_trimmed() {
        let folder = tempfile::tempdir().unwrap();
        let dir = folder.path();
        let (_, cookie) = Secret::new_cookie().unwrap();
        let path = dir.join("cookie");
        std::fs::write(&path, format!("  {cookie}\t\r\nsecond line\n")).unwrap();
        assert_eq!(Secret::cookie_file(&path).unwrap().0, cookie.as_bytes());
        std::fs::write(&path, [0xffu8, 0xfe, b'\n']).unwrap();
        let error = Secret::cookie_file(&path).err().unwrap();
        assert!(error.contains("other than hexadecimal digits"), "{error}");
        let error = Secret::cookie_file(&dir.join("none")).err().unwrap();
        assert!(error.starts_with("cannot read the cookie file "), "{error}");
    }

    #[test]
    fn the_tokens_are_the_vectors_tokens() {
        // protocol/vectors/net/handshake.json: its tokens are those of its cookie, nonce and
        // settings (the crate taskmeter-net-protocol holds the wire's bytes to the same file).
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../protocol/vectors/net/handshake.json");
        let vectors: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let secret = Secret::cookie(vectors["cookie"].as_str().unwrap(), "the vectors").unwrap();
        let nonce = taskmeter_net_protocol::unhex(vectors["nonce"].as_str().unwrap()).unwrap();
        let settings = |key: &str| vectors[key].as_u64().unwrap() as u32;
        let tokens = vectors["tokens"].as_array().unwrap();
        assert_eq!(tokens.len(), settings("connections") as usize);
        for (i, token) in tokens.iter().enumerate() {
            let ours = secret.token(&nonce, i as u32, settings("connections"), settings("message_size"));
            assert_eq!(hex(&ours), token.as_str().unwrap(), "sender {i}");
        }
    }
}
