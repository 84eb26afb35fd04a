//! The net experiment's wire: the session handshake of net protocol 2 (receivers/README.md, "The
//! handshake"), as every Rust side speaks it: taskmeter's senders and built-in receivers
//! (taskmeter-measure's `net`) and the wasm-thread guest (receivers/wasm-thread/guest). The receiver
//! sends a [`Challenge`], the sender answers with a [`Hello`], and the receiver judges it against
//! the tokens of the plan ([`Roll`]) and answers with a verdict; at most `max_pending`
//! handshakes run at once ([`Admission`]).
//!
//! No cryptography: taskmeter computes every token (an HMAC of the nonce), a receiver only
//! compares bytes, in constant time ([`same_token`]). The bytes are held to the vectors in
//! protocol/vectors/net (this crate's test `vectors`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use subtle::ConstantTimeEq;

/// The net protocol of a plan's `protocol`.
pub const PROTOCOL: u32 = 2;
/// The first 8 bytes of a challenge.
pub const CHALLENGE_MAGIC: &[u8; 8] = b"TMNET2C\0";
/// The first 8 bytes of a hello.
pub const HELLO_MAGIC: &[u8; 8] = b"TMNET2H\0";
/// The verdict that starts every joined sender, once all have joined.
pub const JOINED: &[u8; 8] = b"TMNET2OK";
/// The verdict on a hello with the wrong magic or the wrong token.
pub const WRONG_TOKEN: &[u8; 8] = b"TMNET2NO";
/// The verdict on a hello whose index is out of range, or of a sender that has joined.
pub const INDEX_TAKEN: &[u8; 8] = b"TMNET2DU";
/// A challenge: the magic, the nonce, `connections` and `message_size`.
pub const CHALLENGE_BYTES: usize = 48;
/// A hello: the magic, the sender's index and its token; a receiver reads exactly this many bytes
/// before its verdict.
pub const HELLO_BYTES: usize = 44;
/// A verdict.
pub const VERDICT_BYTES: usize = 8;
/// A nonce, and a token.
pub const TOKEN_BYTES: usize = 32;

/// What a receiver sends first on every connection: the point's nonce and the settings it
/// expects (every integer of the wire is unsigned 32-bit little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Challenge {
    pub nonce: [u8; TOKEN_BYTES],
    pub connections: u32,
    pub message_size: u32,
}

impl Challenge {
    pub fn to_bytes(&self) -> [u8; CHALLENGE_BYTES] {
        let mut bytes = [0u8; CHALLENGE_BYTES];
        bytes[..8].copy_from_slice(CHALLENGE_MAGIC);
        bytes[8..40].copy_from_slice(&self.nonce);
        bytes[40..44].copy_from_slice(&self.connections.to_le_bytes());
        bytes[44..48].copy_from_slice(&self.message_size.to_le_bytes());
        bytes
    }

    /// The challenge in `bytes`, or None if they do not start with [`CHALLENGE_MAGIC`] (not a
    /// taskmeter receiver).
    pub fn from_bytes(bytes: &[u8; CHALLENGE_BYTES]) -> Option<Challenge> {
        (&bytes[..8] == CHALLENGE_MAGIC).then(|| Challenge {
            nonce: bytes[8..40].try_into().expect("32 bytes"),
            connections: u32_at(bytes, 40),
            message_size: u32_at(bytes, 44),
        })
    }
}

/// What a sender answers a challenge with: its index and its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub index: u32,
    pub token: [u8; TOKEN_BYTES],
}

impl Hello {
    pub fn to_bytes(&self) -> [u8; HELLO_BYTES] {
        let mut bytes = [0u8; HELLO_BYTES];
        bytes[..8].copy_from_slice(HELLO_MAGIC);
        bytes[8..12].copy_from_slice(&self.index.to_le_bytes());
        bytes[12..44].copy_from_slice(&self.token);
        bytes
    }

    /// The hello in `bytes`, or None if they do not start with [`HELLO_MAGIC`] (not a taskmeter
    /// sender).
    pub fn from_bytes(bytes: &[u8; HELLO_BYTES]) -> Option<Hello> {
        (&bytes[..8] == HELLO_MAGIC)
            .then(|| Hello { index: u32_at(bytes, 8), token: bytes[12..44].try_into().expect("32 bytes") })
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Whether a hello's token is `expected`, in a time that does not depend on where they differ
/// (every receiver compares this way: a comparison that stops at the first difference would
/// tell a stranger, by its timing, how much of a token it has right).
pub fn same_token(token: &[u8], expected: &[u8; TOKEN_BYTES]) -> bool {
    token.ct_eq(&expected[..]).into()
}

/// Why a receiver refuses a hello: each has its verdict ([`Refusal::verdict`]) and, written, the
/// reason of the receiver's `stranger` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The wrong magic: [`WRONG_TOKEN`].
    NotASender,
    /// An index beyond the point's senders: [`INDEX_TAKEN`].
    NotOfThisPoint(u32),
    /// A token other than the index's: [`WRONG_TOKEN`].
    WrongToken(u32),
    /// The index of a sender that has joined (with its token): [`INDEX_TAKEN`].
    AlreadyJoined(u32),
}

impl Refusal {
    /// The verdict the receiver sends before it closes the connection.
    pub fn verdict(self) -> &'static [u8; VERDICT_BYTES] {
        match self {
            Refusal::NotASender | Refusal::WrongToken(_) => WRONG_TOKEN,
            Refusal::NotOfThisPoint(_) | Refusal::AlreadyJoined(_) => INDEX_TAKEN,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotASender => write!(f, "not a taskmeter sender"),
            Refusal::NotOfThisPoint(index) => write!(f, "sender {index} is not of this point"),
            Refusal::WrongToken(index) => write!(f, "wrong token for sender {index}"),
            Refusal::AlreadyJoined(index) => write!(f, "sender {index} had already joined"),
        }
    }
}

/// Judges a hello against the point's `tokens` and who has `joined` (one slot per sender): the
/// sender's index, its slot now taken, or why it is refused. Checked in the contract's order:
/// the magic, the index's range, the token (in constant time), then the slot: the token before
/// the slot, so that only a sender with the secret learns who has joined.
pub fn judge(hello: &[u8; HELLO_BYTES], tokens: &[[u8; TOKEN_BYTES]], joined: &mut [bool]) -> Result<u32, Refusal> {
    let Some(Hello { index, token }) = Hello::from_bytes(hello) else {
        return Err(Refusal::NotASender);
    };
    let (Some(expected), Some(slot)) = (tokens.get(index as usize), joined.get_mut(index as usize)) else {
        return Err(Refusal::NotOfThisPoint(index));
    };
    if !same_token(&token, expected) {
        return Err(Refusal::WrongToken(index));
    }
    if *slot {
        return Err(Refusal::AlreadyJoined(index));
    }
    *slot = true;
    Ok(index)
}

/// A receiver's roll of one point, shared by every handshake: the senders' tokens, and who has
/// joined, under one lock (two hellos of one index cannot both join).
pub struct Roll {
    tokens: Vec<[u8; TOKEN_BYTES]>,
    joined: Mutex<Vec<bool>>,
    count: AtomicU32,
}

impl Roll {
    /// The roll of a point whose sender `i` presents `tokens[i]`.
    pub fn new(tokens: Vec<[u8; TOKEN_BYTES]>) -> Roll {
        let joined = Mutex::new(vec![false; tokens.len()]);
        Roll { tokens, joined, count: AtomicU32::new(0) }
    }

    /// Judges a hello ([`judge`]); a sender that passes has joined.
    pub fn judge(&self, hello: &[u8; HELLO_BYTES]) -> Result<u32, Refusal> {
        let mut joined = self.joined.lock().unwrap_or_else(|e| e.into_inner());
        let index = judge(hello, &self.tokens, &mut joined)?;
        self.count.fetch_add(1, Ordering::SeqCst);
        Ok(index)
    }

    /// How many senders have joined.
    pub fn joined(&self) -> u32 {
        self.count.load(Ordering::SeqCst)
    }
}

/// The admission bound: at most `max_pending` handshakes at once; a connection accepted beyond
/// that is closed at once, as a stranger.
pub struct Admission {
    max_pending: u32,
    pending: AtomicU32,
}

impl Admission {
    /// A plan's `max_pending`, at least 1.
    pub fn new(max_pending: u32) -> Admission {
        Admission { max_pending: max_pending.max(1), pending: AtomicU32::new(0) }
    }

    /// Takes a handshake slot (give it back with [`Admission::release`] when the handshake
    /// ends), or says the connection must be refused at once.
    pub fn admit(&self) -> bool {
        self.pending.fetch_add(1, Ordering::SeqCst) < self.max_pending || {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            false
        }
    }

    /// A handshake has ended (joined or refused): its slot is free.
    pub fn release(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The bytes of 64 hexadecimal digits: a plan's `nonce` or one of its `tokens`.
pub fn unhex(text: &str) -> Option<[u8; TOKEN_BYTES]> {
    // Digits only (from_str_radix alone would take a sign: "+f").
    if text.len() != 2 * TOKEN_BYTES || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut bytes = [0u8; TOKEN_BYTES];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_admission_bound_holds_and_frees_its_slots() {
        let admission = Admission::new(2);
        assert!(admission.admit() && admission.admit());
        assert!(!admission.admit(), "a third handshake at once is refused");
        admission.release();
        assert!(admission.admit(), "a slot freed is taken again");
        assert!(!admission.admit());
        let zero = Admission::new(0);
        assert!(zero.admit(), "max_pending is at least 1");
        assert!(!zero.admit());
    }

    #[test]
    fn unhex_takes_64_hex_digits_only() {
        let text = "00ff".repeat(16);
        assert_eq!(unhex(&text), Some(std::array::from_fn(|i| if i % 2 == 0 { 0 } else { 0xff })));
        assert_eq!(unhex(&text.to_uppercase()), unhex(&text));
        assert_eq!(unhex(&text[..62]), None);
        assert_eq!(unhex(&format!("{}zz", &text[..62])), None);
        assert_eq!(unhex(&format!("{}é", &text[..62])), None, "not a char boundary: no panic");
        assert_eq!(unhex(&format!("{}+1", &text[..62])), None, "from_str_radix's sign is not a digit");
    }
}
