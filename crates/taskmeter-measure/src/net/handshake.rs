//! The session handshake of net protocol 2 (receivers/README.md, "The handshake"): who may join
//! a point as a sender. The receiver sends a challenge (the point's nonce and settings), the
//! sender answers with its index and a token, `HMAC-SHA256(secret, ...)` of that nonce; the
//! receiver compares it with the token taskmeter computed for that index (in constant time:
//! [`same_token`]), and starts every sender together once all have joined. All the cryptography
//! is here: a receiver compares bytes.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

pub const CHALLENGE_MAGIC: &[u8; 8] = b"TMNET2C\0";
pub const HELLO_MAGIC: &[u8; 8] = b"TMNET2H\0";
pub const JOINED: &[u8; 8] = b"TMNET2OK";
pub const WRONG_TOKEN: &[u8; 8] = b"TMNET2NO";
pub const INDEX_TAKEN: &[u8; 8] = b"TMNET2DU";
pub const CHALLENGE_BYTES: usize = 48;
pub const HELLO_BYTES: usize = 44;

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

/// Whether a hello's token is `expected`, in a time that does not depend on where they differ
/// (every receiver compares this way: a comparison that stops at the first difference would
/// tell a stranger, by its timing, how much of a token it has right).
pub fn same_token(token: &[u8], expected: &[u8; 32]) -> bool {
    token.ct_eq(&expected[..]).into()
}

/// A receiver's plan for one point: a new nonce, and every sender's token for it.
pub fn plan(secret: &Secret, connections: u32, message_size: usize) -> Result<taskmeter_model::net::NetPlan, String> {
    let nonce = random::<32>()?;
    let size = u32::try_from(message_size).map_err(|_| "a message size above 4 GiB".to_string())?;
    Ok(taskmeter_model::net::NetPlan {
        protocol: 2,
        connections,
        message_size,
        handshake_ms: HANDSHAKE.as_millis() as u64,
        max_pending: MAX_PENDING,
        nonce: hex(&nonce),
        tokens: (0..connections).map(|i| hex(&secret.token(&nonce, i, connections, size))).collect(),
    })
}

/// The bytes of 64 hexadecimal digits (a plan's nonce or token).
pub fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(bytes)
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

/// The challenge a receiver sends: its nonce, and the settings it expects.
pub fn challenge(nonce: &[u8; 32], connections: u32, message_size: u32) -> [u8; CHALLENGE_BYTES] {
    let mut bytes = [0u8; CHALLENGE_BYTES];
    bytes[..8].copy_from_slice(CHALLENGE_MAGIC);
    bytes[8..40].copy_from_slice(nonce);
    bytes[40..44].copy_from_slice(&connections.to_le_bytes());
    bytes[44..48].copy_from_slice(&message_size.to_le_bytes());
    bytes
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
    let mut challenge = [0u8; CHALLENGE_BYTES];
    match read_full(stream, &mut challenge, deadline.min(Instant::now() + 2 * HANDSHAKE)) {
        Ok(()) if &challenge[..8] == CHALLENGE_MAGIC => {}
        Ok(()) => return Err(JoinError::Refused(not_a_receiver(&peer, &challenge, None))),
        // Nothing yet: closed (busy with strangers, or a receiver of the previous point), or
        // still in a full accept queue: worth connecting again while the deadline allows.
        Err((0, e)) => return Err(JoinError::Again(not_a_receiver(&peer, &[], Some(e)))),
        Err((got, e)) => return Err(JoinError::Refused(not_a_receiver(&peer, &challenge[..got], Some(e)))),
    }
    let nonce: [u8; 32] = challenge[8..40].try_into().expect("32 bytes");
    let expects = |at: usize| u32::from_le_bytes(challenge[at..at + 4].try_into().expect("4 bytes"));
    if (expects(40), expects(44)) != (connections, message_size) {
        return Err(JoinError::Refused(format!(
            "the receiver at {peer} expects {} senders of {}-byte messages; this point has {connections} of {message_size}-byte messages (give net send and net serve the same --senders and --message-size)",
            expects(40),
            expects(44)
        )));
    }
    let mut hello = [0u8; HELLO_BYTES];
    hello[..8].copy_from_slice(HELLO_MAGIC);
    hello[8..12].copy_from_slice(&index.to_le_bytes());
    hello[12..44].copy_from_slice(&secret.token(&nonce, index, connections, message_size));
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
    fn the_constant_time_comparison_answers_as_equality_does() {
        let expected: [u8; 32] = std::array::from_fn(|i| i as u8 * 7 + 1);
        let mut first = expected;
        first[0] ^= 0x80;
        let mut last = expected;
        last[31] ^= 0x01;
        let all = expected.map(|b| !b);
        for (token, equal) in [(expected, true), (first, false), (last, false), (all, false)] {
            assert_eq!(same_token(&token, &expected), equal, "{token:?}");
            assert_eq!(same_token(&token, &expected), token == expected);
        }
        // A hello's token is a slice of it; one of another length is never equal.
        assert!(same_token(&expected[..], &expected));
        assert!(!same_token(&expected[..31], &expected));
        assert!(!same_token(&[], &expected));
    }
}
