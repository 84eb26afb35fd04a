//! The frames a worker writes (protocol/README.md, "Frames"): a 5-byte header (kind, payload
//! length as u32 little-endian), then the payload: JSON for `H`, `G`, `D`, `E`, `V` and `P` and
//! binary for `U` on stdout, binary samples for `S` and `F` in the sample file (fd 3).

use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Read, Write};

pub const CLOCK: &str = "CLOCK_MONOTONIC";
pub const HEADER_BYTES: usize = 5;
/// An `S` or `F` payload: unit (u32), count (u32), origin (u64), first (u64), then the samples.
pub const CHUNK_HEADER_BYTES: usize = 24;
/// A `U` payload: unit (u32), origin, iterations, measured iterations, lost (u64 each). Binary
/// since protocol 6: a 100,000-unit row ends with 100,000 of them, and their JSON cost the
/// orchestrator about 340 ns each to read (issue 58; `check_cost`).
pub const UNIT_BYTES: usize = 36;
/// The worker's descriptor of the sample file, where its `S` and `F` frames go.
pub const SAMPLE_FD: i32 = 3;
/// A sample on the wire: `start`, `busy_end`, `intended`, `wake` (its period and missed
/// deadlines are the orchestrator's to derive: protocol, "Frames").
pub const SAMPLE_BYTES: usize = 32;
/// The name of a worker's writer thread (its `comm`), by which the orchestrator finds it to run
/// it above the units (protocol: "The writer").
pub const WRITER_THREAD: &str = "tm-writer";
/// A frame longer than this is a protocol violation: a whole ring of the largest size the
/// orchestrator gives (`RING_BUDGET` samples, 128 MiB), which a unit whose ring is full writes
/// as one frame, fits; anything longer is garbage.
pub const MAX_PAYLOAD: usize = CHUNK_HEADER_BYTES + SAMPLE_BYTES * crate::plan::RING_BUDGET as usize;

/// The mechanisms a worker may name in `H.priority`.
pub const PRIORITY_MECHANISMS: &[&str] = &["none", "nice", "rt-priority", "embassy", "java", "beam"];

pub mod kind {
    pub const HELLO: u8 = b'H';
    pub const GATE: u8 = b'G';
    pub const SAMPLES: u8 = b'S';
    /// Samples a unit wrote itself, its ring being full.
    pub const FLUSHED: u8 = b'F';
    pub const UNIT: u8 = b'U';
    pub const DONE: u8 = b'D';
    pub const ERROR: u8 = b'E';
    pub const VIEW: u8 = b'V';
    pub const POINT: u8 = b'P';
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: u32,
    pub runtime: String,
    pub runtime_version: String,
    pub clock: String,
    pub pid: u32,
    /// How priority classes are applied: a mechanism, optionally `": "` and a detail.
    pub priority: String,
    /// The wait recipe its units use: the plan's (absent: the runtime's own sleep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
}

impl Hello {
    /// The mechanism word of `priority`.
    pub fn priority_mechanism(&self) -> &str {
        self.priority.split(": ").next().unwrap_or("")
    }
}

/// The start gate opened: every unit started is parked and released now.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// When the worker began creating its units.
    pub create_start_ns: u64,
    /// When the last unit was parked and the gate opened.
    pub run_start_ns: u64,
    /// Units started (below the plan's after a partial start).
    pub units: u32,
    /// Why the units after `units` were not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_error: Option<String>,
}

/// One unit's end: its counts (its samples came in `S` frames).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UnitEnd {
    pub unit: u32,
    pub origin_ns: u64,
    /// Iterations of the loop, sampled or not (the schedule `none` records no samples).
    pub iterations: u64,
    /// Iterations that started at or after `measure_start`.
    pub measured_iterations: u64,
    /// Samples the unit's full ring refused.
    pub lost: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Done {
    pub interrupted: bool,
    /// `busy(busy_iters)` in decimal: proof that the busy work ran.
    pub busy_result: String,
    /// The shared counter's final value (`atomic-sum` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atomic_sum: Option<u64>,
}

/// The runtime's own view of its scheduling over the measured window, from its own API
/// (optional; at most once, after `G` and before `D`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeView {
    /// The API the figures come from, e.g. `runtime/metrics /sched/latencies:seconds`.
    pub source: String,
    /// What that API measures, in a few words.
    pub what: String,
    /// The delay distribution the runtime reports, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<ViewDelay>,
    /// The share of the window the runtime's workers were busy (0 to 1 per worker, averaged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ratio: Option<f64>,
    /// How often the runtime's workers parked (went idle) in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parks: Option<u64>,
}

/// A delay distribution as a runtime reports it, ns.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ViewDelay {
    pub count: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// One grain of the granularity experiment, measured (protocol: "Per grain, exactly").
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// The plan's grain: the busy work asked of one task, ns.
    pub grain_ns: u64,
    /// The busy iterations of one task, from the worker's measured rate.
    pub iters: u64,
    /// `busy(iters)` in decimal: the result every task must return.
    pub busy_result: String,
    /// Calls of `busy(iters)` made one after another, alone, and how long they took.
    pub serial_tasks: u64,
    pub serial_ns: u64,
    /// The same, measured again after the measured rounds (absent from older drivers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_after_tasks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_after_ns: Option<u64>,
    /// Measured rounds, the tasks they started and completed, and the results that differed.
    pub rounds: u64,
    pub tasks: u64,
    pub completed: u64,
    pub wrong: u64,
    /// From the first measured round's start to the last one's end.
    pub wall_ns: u64,
    /// Tasks that can run busy work at once in this runtime here.
    pub cores: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ErrorFrame {
    pub message: String,
}

/// One sample of the work loop (protocol: "The work loop, exactly"). On the wire it is four
/// words ([`Sample::wire_words`]); `period` and `missed` are derived by the checker from the
/// sample's position and its unit's schedule, where protocol 4 sent them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sample {
    /// The period the sleep belonged to; `expected(unit, period)` is its expected sleep.
    pub period: u64,
    pub start_ns: u64,
    pub busy_end_ns: u64,
    pub intended_ns: u64,
    pub wake_ns: u64,
    /// Whole periods the wake passed after `intended` (absolute mode; 0 in relative).
    pub missed: u64,
}

impl Sample {
    /// What the wire carries of it: start, busy_end, intended, wake.
    pub fn wire_words(self) -> [u64; 4] {
        [self.start_ns, self.busy_end_ns, self.intended_ns, self.wake_ns]
    }

    /// A sample of `period` with no missed period from its four words.
    pub fn from_wire_words(period: u64, w: [u64; 4]) -> Sample {
        Sample { period, start_ns: w[0], busy_end_ns: w[1], intended_ns: w[2], wake_ns: w[3], missed: 0 }
    }

    /// A sample from its 32 bytes on the wire (four little-endian words), given its period.
    #[inline(always)]
    pub fn from_bytes(period: u64, bytes: &[u8]) -> Sample {
        Sample::from_wire_words(period, [u64_at(bytes, 0), u64_at(bytes, 8), u64_at(bytes, 16), u64_at(bytes, 24)])
    }
}

/// The samples of one `S` or `F` frame, read in place.
#[derive(Clone, Copy, Debug)]
pub struct Chunk<'a> {
    pub unit: u32,
    pub origin_ns: u64,
    /// The position of its first sample among the unit's samples (0 for the unit's first).
    pub first: u64,
    /// An `F` frame: the unit wrote it itself, its ring being full.
    pub by_unit: bool,
    /// The frame's last samples (false for a piece of a frame but its last: see `pieces`).
    pub ends_frame: bool,
    bytes: &'a [u8],
}

impl<'a> Chunk<'a> {
    /// A chunk over `bytes`, whole samples of [`SAMPLE_BYTES`].
    #[inline]
    pub fn new(unit: u32, origin_ns: u64, first: u64, by_unit: bool, bytes: &'a [u8]) -> Chunk<'a> {
        debug_assert_eq!(bytes.len() % SAMPLE_BYTES, 0);
        Chunk { unit, origin_ns, first, by_unit, ends_frame: true, bytes }
    }

    /// The frame in pieces of at most `most` samples, in order (a reader hands samples on in
    /// batches that stay in a core's cache; a writer's frame may hold 2 million). A frame that
    /// fits is its one piece, found with no division: most frames at many units hold a sample
    /// or two, and this runs for each.
    pub fn pieces(self, most: usize) -> impl Iterator<Item = Chunk<'a>> {
        let most = most.max(1);
        let mut rest = Some(self);
        std::iter::from_fn(move || {
            let chunk = rest.take()?;
            if chunk.len() <= most {
                return Some(chunk);
            }
            let (piece, after) = chunk.bytes.split_at(most * SAMPLE_BYTES);
            rest = Some(Chunk { first: chunk.first + most as u64, bytes: after, ..chunk });
            Some(Chunk { ends_frame: false, bytes: piece, ..chunk })
        })
    }

    /// Calls `each` with the frame's pieces of at most `most` samples ([`Chunk::pieces`]), in
    /// order, until one fails. A frame that fits, as nearly every frame of a run of many units
    /// does, is passed as it is: through the iterator, a frame of one sample cost its check 7 ns
    /// more (`sample_cost UNITS=15 PER_FRAME=1`).
    #[inline]
    pub fn try_for_each_piece<E>(
        &self,
        most: usize,
        mut each: impl FnMut(&Chunk<'a>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.len() <= most {
            return each(self);
        }
        self.pieces(most).try_for_each(|piece| each(&piece))
    }

    /// The samples' bytes, as the frame holds them.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len() / SAMPLE_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The samples, each with its position as its period and no missed period: what relative
    /// mode's are (the checker derives absolute mode's from the unit's schedule).
    pub fn samples(&self) -> impl Iterator<Item = Sample> + 'a {
        let first = self.first;
        self.sample_bytes().enumerate().map(move |(i, bytes)| Sample::from_bytes(first + i as u64, bytes))
    }

    /// Each sample's bytes, for a loop that decodes each where it uses it
    /// ([`Sample::from_bytes`]), asking for the bytes ahead of it ([`Chunk::read_ahead`]).
    pub fn sample_bytes(&self) -> std::slice::ChunksExact<'a, u8> {
        self.bytes.chunks_exact(SAMPLE_BYTES)
    }

    /// Asks the memory for this frame's bytes [`READ_AHEAD`] after `sample`'s (one of
    /// [`Chunk::sample_bytes`]), where the processor's own prefetcher would not: a sample file is
    /// read in place, and the prefetcher stops at each 4 KiB page (reading a file written long
    /// before, a sample cost 1.4 ns less to check, issue 58). Never past the frame: what follows
    /// it may be what the worker writes next, which the writer's core would have to take back.
    #[inline(always)]
    pub fn read_ahead(&self, sample: &[u8]) {
        let at = sample.as_ptr().wrapping_add(READ_AHEAD);
        if at < self.bytes.as_ptr_range().end {
            prefetch(at);
        }
    }
}

/// How far ahead of a sample being read the bytes after it are asked for ([`Chunk::read_ahead`]).
pub const READ_AHEAD: usize = 1024;

/// Asks for the cache line at `at` (on architectures without a stable prefetch, nothing).
#[inline(always)]
fn prefetch(at: *const u8) {
    // SAFETY: SSE is in every x86-64, and a prefetch reads nothing and never faults.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[derive(Clone, Debug)]
pub enum Frame<'a> {
    Hello(Hello),
    Gate(Gate),
    Samples(Chunk<'a>),
    Unit(UnitEnd),
    Done(Done),
    Error(ErrorFrame),
    View(RuntimeView),
    Point(Point),
}

impl Frame<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "H (hello)",
            Frame::Gate(_) => "G (gate)",
            Frame::Samples(c) if c.by_unit => "F (samples flushed by their unit)",
            Frame::Samples(_) => "S (samples)",
            Frame::Unit(_) => "U (unit)",
            Frame::Done(_) => "D (done)",
            Frame::Error(_) => "E (error)",
            Frame::View(_) => "V (the runtime's view)",
            Frame::Point(_) => "P (a grain)",
        }
    }
}

/// Reads one frame's payload as its kind says.
pub fn decode(kind: u8, payload: &[u8]) -> Result<Frame<'_>, String> {
    // Its text is checked as UTF-8 once, whole: from bytes, serde_json checks each string
    // apart, and a `U` frame's five keys took a quarter of its 160 ns (100,000 of them end a
    // 100,000-unit row).
    fn json<'de, T: Deserialize<'de>>(name: &str, payload: &'de [u8]) -> Result<T, String> {
        let text = std::str::from_utf8(payload).map_err(|e| format!("the {name} frame is not UTF-8: {e}"))?;
        serde_json::from_str(text).map_err(|e| format!("the {name} frame does not match the schema: {e}"))
    }
    Ok(match kind {
        kind::HELLO => Frame::Hello(json("H", payload)?),
        kind::GATE => Frame::Gate(json("G", payload)?),
        kind::UNIT => Frame::Unit(decode_unit(payload)?),
        kind::DONE => Frame::Done(json("D", payload)?),
        kind::ERROR => Frame::Error(json("E", payload)?),
        kind::VIEW => Frame::View(json("V", payload)?),
        kind::POINT => Frame::Point(json("P", payload)?),
        kind::SAMPLES | kind::FLUSHED => Frame::Samples(decode_samples(kind, payload)?),
        other => return Err(format!("unknown frame kind {}", describe_kind(other))),
    })
}

/// An `S` or `F` frame's samples (`kind` one of the two), as [`decode`] reads them. The sample
/// file's reader calls this directly: a [`Frame`] is 136 bytes, and moving one per frame cost
/// frames of two samples 4-5 ns a sample to read (`sample_cost`, issue 58).
#[inline]
pub fn decode_samples(kind: u8, payload: &[u8]) -> Result<Chunk<'_>, String> {
    let name = kind as char;
    if payload.len() < CHUNK_HEADER_BYTES {
        return Err(format!(
            "an {name} frame of {} bytes is shorter than its {CHUNK_HEADER_BYTES}-byte header",
            payload.len()
        ));
    }
    let (unit, count) = (u32_at(payload, 0), u32_at(payload, 4) as usize);
    let (origin_ns, first) = (u64_at(payload, 8), u64_at(payload, 16));
    let bytes = &payload[CHUNK_HEADER_BYTES..];
    if count == 0 || bytes.len() != count * SAMPLE_BYTES {
        return Err(format!(
            "an {name} frame of unit {unit} says {count} samples but holds {} bytes of samples ({SAMPLE_BYTES} each, at least 1)",
            bytes.len()
        ));
    }
    Ok(Chunk::new(unit, origin_ns, first, kind == kind::FLUSHED, bytes))
}

/// A `U` frame's counts: exactly [`UNIT_BYTES`], little-endian.
pub fn decode_unit(payload: &[u8]) -> Result<UnitEnd, String> {
    if payload.len() != UNIT_BYTES {
        return Err(format!("a U frame of {} bytes is not the {UNIT_BYTES} of a unit's end", payload.len()));
    }
    Ok(UnitEnd {
        unit: u32_at(payload, 0),
        origin_ns: u64_at(payload, 4),
        iterations: u64_at(payload, 12),
        measured_iterations: u64_at(payload, 20),
        lost: u64_at(payload, 28),
    })
}

/// The little-endian u32 at `at` (which the caller has checked is in `bytes`).
#[inline(always)]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The little-endian u64 at `at` (which the caller has checked is in `bytes`).
#[inline(always)]
fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn describe_kind(kind: u8) -> String {
    if kind.is_ascii_graphic() {
        format!("'{}'", kind as char)
    } else {
        format!("0x{kind:02x}")
    }
}

/// Reads frames from a buffered stream (a worker's stdout).
pub struct FrameReader<R> {
    inner: R,
    /// A frame that did not lie whole in the stream's buffer, copied out.
    payload: Vec<u8>,
    /// The bytes of the last frame read in place from the buffer, consumed at the next read.
    read_in_place: usize,
}

/// Why no further frame could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The stream ended inside a frame (the worker died while writing it).
    Cut {
        kind: u8,
        missing: usize,
    },
    TooLong {
        kind: u8,
        len: usize,
    },
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Cut { kind, missing } => {
                write!(f, "the output ends inside a frame {} ({missing} bytes missing)", describe_kind(*kind))
            }
            ReadError::TooLong { kind, len } => {
                write!(f, "a frame {} says it holds {len} bytes (at most {MAX_PAYLOAD})", describe_kind(*kind))
            }
            ReadError::Io(e) => write!(f, "cannot read the output: {e}"),
        }
    }
}

impl<R: BufRead> FrameReader<R> {
    pub fn new(inner: R) -> FrameReader<R> {
        FrameReader { inner, payload: Vec::new(), read_in_place: 0 }
    }

    /// The next frame's kind and payload; None at a clean end of the stream.
    pub fn next_raw(&mut self) -> Result<Option<(u8, &[u8])>, ReadError> {
        self.inner.consume(std::mem::take(&mut self.read_in_place));
        if let Some((kind, len)) = self.whole_in_buffer()? {
            // Most frames: read where they lie, without a copy (a copy was a tenth of reading
            // a frame at 10,000 units, issue 28).
            let buffered = self.inner.fill_buf().map_err(ReadError::Io)?;
            self.read_in_place = HEADER_BYTES + len;
            return Ok(Some((kind, &buffered[HEADER_BYTES..HEADER_BYTES + len])));
        }
        let mut header = [0u8; HEADER_BYTES];
        match read_full(&mut self.inner, &mut header).map_err(ReadError::Io)? {
            0 => return Ok(None),
            n if n < HEADER_BYTES => return Err(ReadError::Cut { kind: header[0], missing: HEADER_BYTES - n }),
            _ => {}
        }
        let (kind, len) = parse_header(&header)?;
        self.payload.resize(len, 0);
        let got = read_full(&mut self.inner, &mut self.payload).map_err(ReadError::Io)?;
        if got < len {
            return Err(ReadError::Cut { kind, missing: len - got });
        }
        Ok(Some((kind, &self.payload)))
    }

    /// The next frame's kind and length if the stream's buffer (filled if empty) holds all of it.
    fn whole_in_buffer(&mut self) -> Result<Option<(u8, usize)>, ReadError> {
        let buffered = loop {
            match self.inner.fill_buf() {
                Ok(buffered) => break buffered,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        };
        let Some(header) = buffered.get(..HEADER_BYTES) else { return Ok(None) };
        let (kind, len) = parse_header(header)?;
        Ok((buffered.len() >= HEADER_BYTES + len).then_some((kind, len)))
    }
}

impl<R: Read> FrameReader<io::BufReader<R>> {
    /// Whether the next frame lies whole in the stream's buffer: reading it will not wait.
    pub fn next_is_buffered(&self) -> bool {
        let buffered = &self.inner.buffer()[self.read_in_place..];
        match buffered.get(..HEADER_BYTES).map(parse_header) {
            Some(Ok((_, len))) => buffered.len() >= HEADER_BYTES + len,
            _ => false,
        }
    }
}

/// The kind and whole length (header and payload) of the first frame of `bytes` if they hold
/// all of it; None when they hold only part of it (for readers of a stream that grows).
#[inline]
pub fn whole_frame(bytes: &[u8]) -> Result<Option<(u8, usize)>, ReadError> {
    let Some(header) = bytes.get(..HEADER_BYTES) else { return Ok(None) };
    let (kind, len) = parse_header(header)?;
    Ok((bytes.len() >= HEADER_BYTES + len).then_some((kind, HEADER_BYTES + len)))
}

/// A frame header's kind and payload length.
#[inline]
fn parse_header(header: &[u8]) -> Result<(u8, usize), ReadError> {
    let kind = header[0];
    let len = u32_at(header, 1) as usize;
    if len > MAX_PAYLOAD {
        return Err(ReadError::TooLong { kind, len });
    }
    Ok((kind, len))
}

/// Fills `buf` unless the stream ends first; the number of bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Appends a frame's header to `out`.
pub fn put_header(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.push(kind);
    out.extend_from_slice(&(len as u32).to_le_bytes());
}

/// Appends a JSON frame to `out` (not a `U` frame: [`put_unit`]).
pub fn put_json<T: Serialize>(out: &mut Vec<u8>, kind: u8, value: &T) {
    debug_assert!(kind != kind::UNIT, "a U frame is binary since protocol 6");
    let payload = serde_json::to_vec(value).expect("frames always serialise");
    put_header(out, kind, payload.len());
    out.extend_from_slice(&payload);
}

/// Appends a `U` frame (binary: [`UNIT_BYTES`]).
pub fn put_unit(out: &mut Vec<u8>, end: &UnitEnd) {
    put_header(out, kind::UNIT, UNIT_BYTES);
    out.extend_from_slice(&end.unit.to_le_bytes());
    for word in [end.origin_ns, end.iterations, end.measured_iterations, end.lost] {
        out.extend_from_slice(&word.to_le_bytes());
    }
}

/// Which unit's samples a frame holds, from which position, and who wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHead {
    pub unit: u32,
    pub origin_ns: u64,
    /// The position of the first sample among the unit's samples.
    pub first: u64,
    /// `F`: the unit itself, its ring being full; `S`: the writer.
    pub by_unit: bool,
}

/// Appends an `S` (or `F`) frame of `samples` (at least one) to `out`.
pub fn put_samples(out: &mut Vec<u8>, head: ChunkHead, samples: impl ExactSizeIterator<Item = Sample>) {
    let count = samples.len();
    let kind = if head.by_unit { kind::FLUSHED } else { kind::SAMPLES };
    put_header(out, kind, CHUNK_HEADER_BYTES + count * SAMPLE_BYTES);
    out.extend_from_slice(&head.unit.to_le_bytes());
    out.extend_from_slice(&(count as u32).to_le_bytes());
    out.extend_from_slice(&head.origin_ns.to_le_bytes());
    out.extend_from_slice(&head.first.to_le_bytes());
    for sample in samples {
        for word in sample.wire_words() {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
}

/// Writes one JSON frame in one write.
pub fn write_json<T: Serialize>(out: &mut impl Write, kind: u8, value: &T) -> io::Result<()> {
    let mut buffer = Vec::new();
    put_json(&mut buffer, kind, value);
    out.write_all(&buffer)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `U` frame is 36 bytes, little-endian, in the protocol's order: written and read back
    /// as these bytes, and refused one byte short or long.
    #[test]
    fn a_unit_frame_is_its_five_numbers_in_36_bytes() {
        let end =
            UnitEnd { unit: 3, origin_ns: 0x0102_0304_0506_0708, iterations: 36, measured_iterations: 30, lost: 1 };
        let mut bytes = Vec::new();
        put_unit(&mut bytes, &end);
        let mut expected = vec![b'U', 36, 0, 0, 0, 3, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1];
        for word in [36u8, 30, 1] {
            expected.extend_from_slice(&[word, 0, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(bytes, expected);
        assert!(matches!(decode(kind::UNIT, &bytes[HEADER_BYTES..]), Ok(Frame::Unit(u)) if u == end));
        assert_eq!(
            decode(kind::UNIT, &bytes[HEADER_BYTES..bytes.len() - 1]).err().unwrap(),
            "a U frame of 35 bytes is not the 36 of a unit's end"
        );
        let mut longer = bytes[HEADER_BYTES..].to_vec();
        longer.push(0);
        assert!(decode(kind::UNIT, &longer).is_err());
    }

    /// A JSON frame is read from its text, checked as UTF-8 once: a `G` frame reads back as
    /// written, one whose bytes are not UTF-8 (inside a string or out of one) is refused as
    /// such, and valid UTF-8 outside the schema as not matching it.
    #[test]
    fn json_frames_are_utf8_text_that_matches_the_schema() {
        let gate = Gate { create_start_ns: 40, run_start_ns: 90, units: 5, start_error: None };
        let mut bytes = Vec::new();
        put_json(&mut bytes, kind::GATE, &gate);
        assert!(matches!(decode(kind::GATE, &bytes[HEADER_BYTES..]), Ok(Frame::Gate(g)) if g == gate));
        let message = |payload: &[u8]| decode(kind::ERROR, payload).err().unwrap_or_default();
        assert_eq!(
            message(b"{\"message\":\"\xff\"}"),
            "the E frame is not UTF-8: invalid utf-8 sequence of 1 bytes from index 12"
        );
        assert!(message(b"{\"message\":\"x\"}\xc3").starts_with("the E frame is not UTF-8"));
        let other = "{\"message\":\"x\",\"h\u{e9}\":1}".as_bytes();
        assert!(
            message(other).starts_with("the E frame does not match the schema: unknown field `h\u{e9}`"),
            "{}",
            message(other)
        );
        assert!(
            matches!(decode(kind::ERROR, "{\"message\":\"d\u{e9}j\u{e0}\"}".as_bytes()), Ok(Frame::Error(e)) if e.message == "d\u{e9}j\u{e0}")
        );
    }

    #[test]
    fn frames_round_trip_and_cut_frames_are_told_apart_from_the_end() {
        let mut bytes = Vec::new();
        put_json(&mut bytes, kind::ERROR, &ErrorFrame { message: "no".into() });
        // Period and missed are not on the wire: the samples read back have their positions.
        let sent = [Sample { period: 1, start_ns: 2, busy_end_ns: 3, intended_ns: 4, wake_ns: 5, missed: 6 }; 2];
        put_samples(&mut bytes, ChunkHead { unit: 7, origin_ns: 99, first: 5, by_unit: true }, sent.iter().copied());
        let samples = [5, 6].map(|period| Sample { period, missed: 0, ..sent[0] });
        let mut reader = FrameReader::new(bytes.as_slice());
        let (k, payload) = reader.next_raw().unwrap().unwrap();
        assert!(matches!(decode(k, payload).unwrap(), Frame::Error(ErrorFrame { message }) if message == "no"));
        let (k, payload) = reader.next_raw().unwrap().unwrap();
        let Frame::Samples(chunk) = decode(k, payload).unwrap() else { panic!("an S frame") };
        assert_eq!((chunk.unit, chunk.origin_ns, chunk.first, chunk.by_unit, chunk.len()), (7, 99, 5, true, 2));
        assert_eq!(chunk.samples().collect::<Vec<_>>(), samples);
        assert!(reader.next_raw().unwrap().is_none(), "a clean end");

        let cut = &bytes[..bytes.len() - 3];
        let mut reader = FrameReader::new(cut);
        reader.next_raw().unwrap();
        assert!(matches!(reader.next_raw(), Err(ReadError::Cut { kind: b'F', missing: 3 })));
        assert_eq!(payload_of(&bytes).len(), 24 + 2 * 32, "four words a sample");
        assert!(decode(b'S', &payload_of(&bytes)[..28]).unwrap_err().contains("holds 4 bytes"));
        assert!(decode(b'F', &payload_of(&bytes)[..20]).unwrap_err().contains("shorter than its 24-byte header"));
        assert!(decode(b'X', b"{}").unwrap_err().contains("unknown frame kind 'X'"));
        assert!(decode(b'H', b"{\"protocol\":3}").unwrap_err().contains("missing field"));
    }

    #[test]
    fn a_frame_in_pieces_is_its_samples_in_order_and_only_its_last_piece_ends_it() {
        let samples = (0..5u32).map(|p| Sample { start_ns: 10 + u64::from(p), ..Sample::default() });
        let mut bytes = Vec::new();
        put_samples(&mut bytes, ChunkHead { unit: 3, origin_ns: 1, first: 7, by_unit: true }, samples);
        let Frame::Samples(chunk) = decode(kind::FLUSHED, &bytes[HEADER_BYTES..]).unwrap() else { panic!("F") };
        let shape = |most: usize| -> Vec<(u64, Vec<u64>, bool)> {
            chunk.pieces(most).map(|p| (p.first, p.samples().map(|s| s.start_ns).collect(), p.ends_frame)).collect()
        };
        let all = (10..15).collect::<Vec<u64>>();
        assert_eq!(shape(2), [(7, vec![10, 11], false), (9, vec![12, 13], false), (11, vec![14], true)]);
        assert_eq!(shape(5), [(7, all.clone(), true)], "a frame that fits is one piece");
        assert_eq!(shape(9), [(7, all, true)]);
        assert!(chunk.pieces(2).all(|p| p.unit == 3 && p.origin_ns == 1 && p.by_unit));
        // The same pieces one by one, the frame itself where it fits; the first failure stops.
        for most in [1, 2, 4, 5, 9] {
            let mut each = Vec::new();
            let done: Result<(), ()> = chunk.try_for_each_piece(most, |p| {
                each.push((p.first, p.samples().map(|s| s.start_ns).collect(), p.ends_frame));
                Ok(())
            });
            assert_eq!((done, each), (Ok(()), shape(most)), "at most {most}");
        }
        let mut seen = 0;
        let stopped = chunk.try_for_each_piece(2, |p| {
            seen += 1;
            if p.first == 9 {
                Err(p.first)
            } else {
                Ok(())
            }
        });
        assert_eq!(stopped, Err(9));
        assert_eq!(seen, 2, "the piece after the failing one is not passed");
    }

    /// Frames that lie across the edges of the stream's buffer (copied out) read as those that
    /// lie whole in it (read in place), whatever the buffer's size.
    #[test]
    fn frames_read_alike_in_place_and_across_the_buffer() {
        let mut bytes = Vec::new();
        for unit in 1..=40u32 {
            let samples = (0..unit % 7 + 1).map(u64::from).map(|p| Sample {
                period: p,
                start_ns: 1,
                busy_end_ns: 2,
                intended_ns: 3,
                wake_ns: 4 + p,
                missed: 0,
            });
            let head = ChunkHead { unit, origin_ns: 10 * u64::from(unit), first: 0, by_unit: false };
            put_samples(&mut bytes, head, samples);
            put_json(&mut bytes, kind::ERROR, &ErrorFrame { message: format!("after unit {unit}") });
        }
        fn frames(mut reader: FrameReader<impl BufRead>) -> Vec<(u8, Vec<u8>)> {
            let mut all = Vec::new();
            while let Some((kind, payload)) = reader.next_raw().unwrap() {
                all.push((kind, payload.to_vec()));
            }
            all
        }
        let whole = frames(FrameReader::new(bytes.as_slice()));
        assert_eq!(whole.len(), 80);
        for capacity in [1, 5, 7, 64, 100, 333] {
            let buffered = std::io::BufReader::with_capacity(capacity, bytes.as_slice());
            assert_eq!(frames(FrameReader::new(buffered)), whole, "a buffer of {capacity} bytes");
        }
        let cut = std::io::BufReader::with_capacity(64, &bytes[..bytes.len() - 3]);
        let mut reader = FrameReader::new(cut);
        for _ in 0..79 {
            reader.next_raw().unwrap().unwrap();
        }
        assert!(matches!(reader.next_raw(), Err(ReadError::Cut { kind: b'E', missing: 3 })));
    }

    #[test]
    fn the_reader_knows_whether_the_next_frame_is_already_buffered() {
        let mut bytes = Vec::new();
        let head = ChunkHead { unit: 1, origin_ns: 10, first: 0, by_unit: false };
        put_samples(&mut bytes, head, [Sample::default(); 2].into_iter());
        let first = bytes.len();
        put_json(&mut bytes, kind::ERROR, &ErrorFrame { message: "next".into() });
        // The buffer holds both frames, then the first and part of the second.
        for (capacity, second_buffered) in [(1024, true), (first + HEADER_BYTES + 3, false)] {
            let mut reader = FrameReader::new(std::io::BufReader::with_capacity(capacity, bytes.as_slice()));
            assert!(!reader.next_is_buffered(), "nothing is read yet");
            assert_eq!(reader.next_raw().unwrap().unwrap().0, kind::SAMPLES);
            assert_eq!(reader.next_is_buffered(), second_buffered, "a buffer of {capacity} bytes");
            assert_eq!(reader.next_raw().unwrap().unwrap().0, kind::ERROR);
            assert!(!reader.next_is_buffered(), "the stream has ended");
            assert!(reader.next_raw().unwrap().is_none());
        }
    }

    fn payload_of(bytes: &[u8]) -> Vec<u8> {
        let first = 5 + u32::from_le_bytes(bytes[1..5].try_into().unwrap()) as usize;
        bytes[first + 5..].to_vec()
    }
}
