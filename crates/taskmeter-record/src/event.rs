//! Events and the wire format shared by every client and the collector (clients/README.md).

/// One event: a CLOCK_MONOTONIC timestamp taken at the call, and a kind with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Event {
    pub t_ns: u64,
    /// kind in bits 62-63, value in bits 0-61.
    pub word: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `value` units completed.
    Record,
    /// The unit `value` started.
    Start,
    /// The unit `value` completed.
    Complete,
}

/// The largest id (and `record_n` count) an event can carry.
pub const MAX_VALUE: u64 = (1 << 62) - 1;

impl Event {
    pub fn record(t_ns: u64, n: u64) -> Event {
        Event { t_ns, word: n & MAX_VALUE }
    }
    pub fn start(t_ns: u64, id: u64) -> Event {
        Event { t_ns, word: 1 << 62 | (id & MAX_VALUE) }
    }
    pub fn complete(t_ns: u64, id: u64) -> Event {
        Event { t_ns, word: 2 << 62 | (id & MAX_VALUE) }
    }
    /// The kind, or None for the reserved kind 3.
    pub fn kind(&self) -> Option<Kind> {
        match self.word >> 62 {
            0 => Some(Kind::Record),
            1 => Some(Kind::Start),
            2 => Some(Kind::Complete),
            _ => None,
        }
    }
    pub fn value(&self) -> u64 {
        self.word & MAX_VALUE
    }
}

pub const MAGIC: [u8; 4] = *b"TMR1";
pub const HEADER_LEN: usize = 32;
pub const EVENT_LEN: usize = 16;
/// The most events one batch may carry on the wire.
pub const MAX_BATCH_EVENTS: usize = 4096;
/// Clients send a batch when they hold this many events.
pub const CLIENT_BATCH_EVENTS: usize = 2048;
pub const FLAG_FINAL: u32 = 1;

/// The header of a batch, all fields little-endian u32 after the magic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchHeader {
    pub flags: u32,
    pub pid: u32,
    pub stream: u32,
    pub seq: u32,
    pub dropped: u32,
    pub count: u32,
}

impl BatchHeader {
    pub fn is_final(&self) -> bool {
        self.flags & FLAG_FINAL != 0
    }
    /// Bytes of the whole batch this header starts.
    pub fn batch_len(&self) -> usize {
        HEADER_LEN + self.count as usize * EVENT_LEN
    }
}

/// Appends one batch (header and events) to `out`.
pub fn encode_batch(header: &BatchHeader, events: &[Event], out: &mut Vec<u8>) {
    debug_assert_eq!(header.count as usize, events.len());
    out.extend_from_slice(&MAGIC);
    for field in [header.flags, header.pid, header.stream, header.seq, header.dropped, header.count, 0] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for event in events {
        out.extend_from_slice(&event.t_ns.to_le_bytes());
        out.extend_from_slice(&event.word.to_le_bytes());
    }
}

/// Why a batch was refused: `reason` names the kind of fault (the collector counts batches per
/// reason), `detail` says what this batch got wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub detail: String,
}

impl Refusal {
    pub fn new(reason: &'static str, detail: impl Into<String>) -> Refusal {
        Refusal { reason, detail: detail.into() }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// Reads a header from the first 32 bytes of `bytes`.
pub fn decode_header(bytes: &[u8]) -> Result<BatchHeader, Refusal> {
    if bytes.len() < HEADER_LEN {
        let detail = format!("a batch of {} bytes is shorter than its 32-byte header", bytes.len());
        return Err(Refusal::new("shorter than a header", detail));
    }
    if bytes[..4] != MAGIC {
        let detail = format!("bad magic {:?} (expected \"TMR1\")", String::from_utf8_lossy(&bytes[..4]));
        return Err(Refusal::new("bad magic", detail));
    }
    let field = |i: usize| u32::from_le_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().unwrap());
    let header = BatchHeader {
        flags: field(0),
        pid: field(1),
        stream: field(2),
        seq: field(3),
        dropped: field(4),
        count: field(5),
    };
    if header.count as usize > MAX_BATCH_EVENTS {
        let detail = format!("a batch of {} events exceeds the limit of {MAX_BATCH_EVENTS}", header.count);
        return Err(Refusal::new("too many events", detail));
    }
    Ok(header)
}

/// Decodes a whole batch: its header, then exactly `count` valid events.
pub fn decode_batch(bytes: &[u8]) -> Result<(BatchHeader, Vec<Event>), Refusal> {
    let header = decode_header(bytes)?;
    if bytes.len() != header.batch_len() {
        let detail =
            format!("a batch of {} events must be {} bytes, got {}", header.count, header.batch_len(), bytes.len());
        return Err(Refusal::new("wrong length", detail));
    }
    let mut events = Vec::with_capacity(header.count as usize);
    for raw in bytes[HEADER_LEN..].chunks_exact(EVENT_LEN) {
        let event = Event {
            t_ns: u64::from_le_bytes(raw[..8].try_into().unwrap()),
            word: u64::from_le_bytes(raw[8..].try_into().unwrap()),
        };
        match event.kind() {
            None => return Err(Refusal::new("reserved kind 3", "an event of the reserved kind 3")),
            Some(Kind::Record) if event.value() == 0 => {
                return Err(Refusal::new("record of 0 units", "a record event of 0 units"))
            }
            _ => events.push(event),
        }
    }
    Ok((header, events))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_round_trips_byte_for_byte() {
        let header = BatchHeader { flags: FLAG_FINAL, pid: 42, stream: 3, seq: 7, dropped: 5, count: 3 };
        let events = [Event::record(10, 1), Event::start(11, 99), Event::complete(12, MAX_VALUE)];
        let mut bytes = Vec::new();
        encode_batch(&header, &events, &mut bytes);
        assert_eq!(bytes.len(), 32 + 3 * 16);
        assert_eq!(&bytes[..4], b"TMR1");
        assert_eq!(&bytes[8..12], &42u32.to_le_bytes());
        assert_eq!(&bytes[32..40], &10u64.to_le_bytes(), "first event's t");
        assert_eq!(&bytes[56..64], &(1u64 << 62 | 99).to_le_bytes(), "second event: start 99");
        let (back, decoded) = decode_batch(&bytes).unwrap();
        assert_eq!(back, header);
        assert_eq!(decoded, events);
        assert_eq!(decoded[1].kind(), Some(Kind::Start));
        assert_eq!(decoded[2].value(), MAX_VALUE);
    }

    #[test]
    fn malformed_batches_are_refused_with_a_reason() {
        let mut bytes = Vec::new();
        encode_batch(&BatchHeader { count: 1, ..Default::default() }, &[Event::record(1, 1)], &mut bytes);
        let wrong_length = decode_batch(&bytes[..40]).unwrap_err();
        assert!(wrong_length.detail.contains("must be 48 bytes") && wrong_length.reason == "wrong length");
        let mut bad_magic = bytes.clone();
        bad_magic[0] = b'X';
        assert_eq!(decode_batch(&bad_magic).unwrap_err().reason, "bad magic");
        let mut zero = bytes.clone();
        zero[40..48].copy_from_slice(&0u64.to_le_bytes());
        assert!(decode_batch(&zero).unwrap_err().to_string().contains("0 units"));
        let mut reserved = bytes.clone();
        reserved[40..48].copy_from_slice(&(3u64 << 62).to_le_bytes());
        assert_eq!(decode_batch(&reserved).unwrap_err().reason, "reserved kind 3");
        assert!(decode_header(&bytes[..10]).unwrap_err().detail.contains("shorter"));
    }
}
