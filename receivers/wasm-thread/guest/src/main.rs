//! The wasm-thread receiver of `taskmeter run net` (net protocol 2, receivers/README.md), built
//! for `wasm32-wasip1-threads`: one std thread (a wasi-thread) per accepted connection, which
//! runs its handshake and, once every sender has joined, reads each message, times it and
//! echoes it. The host (receivers/wasm-thread/host) preopens the listening socket as fd 3.
//!
//! WASI preview 1 on wasmtime 46 (wasi-common) has no socket timeouts (std's `set_read_timeout`
//! says "unsupported"), no `shutdown` of a listener (EBADF), and no non-blocking switch once a
//! second thread is alive (`fd_fdstat_set_flags` is refused with wasi-threads, wasmtime issue
//! 5643; the stdin thread is always alive). What works is `poll_oneoff`, which wasi-libc's `poll`
//! wraps: every wait that must end (a hello that does not come, an accept once every sender has
//! joined) is a `poll` with a timeout before the blocking read or accept, which then returns at
//! once.

#[path = "../../json.rs"]
mod json;

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::wasi::io::{AsRawFd, FromRawFd};
use std::sync::Barrier;
use std::time::{Duration, Instant};
// The wire (the messages, the judging of a hello, the admission bound), as taskmeter's own
// receivers have it.
use taskmeter_net_protocol::{unhex, Admission, Challenge, Roll, CHALLENGE_BYTES, HELLO_BYTES, JOINED, TOKEN_BYTES};

/// How long the accept loop waits on the listener before it looks again whether every sender
/// has joined: nothing can wake a blocked accept in WASI preview 1.
const ACCEPT_POLL: Duration = Duration::from_millis(50);

/// wasi-libc's `struct pollfd` and `poll` (std links wasi-libc; the `libc` crate is not needed).
#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}
const POLLIN: i16 = 0x1; // POLLRDNORM in wasi-libc
extern "C" {
    fn poll(fds: *mut PollFd, count: usize, timeout_ms: i32) -> i32;
}

/// Waits at most `wait` for `fd` to be readable (data, a connection to accept, end-of-file or an
/// error: the next read or accept does not block); false if it was not.
fn readable(fd: &impl AsRawFd, wait: Duration) -> std::io::Result<bool> {
    let mut fds = PollFd { fd: fd.as_raw_fd(), events: POLLIN, revents: 0 };
    // Rounded up, so that a wait of less than a millisecond does not spin.
    let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one pollfd that lives across the call.
    match unsafe { poll(&mut fds, 1, ms) } {
        -1 => match std::io::Error::last_os_error() {
            e if e.kind() == std::io::ErrorKind::Interrupted => Ok(false),
            e => Err(e),
        },
        n => Ok(n > 0),
    }
}

fn fail(message: &str) -> ! {
    println!("{{\"type\":\"error\",\"message\":{}}}", json::quoted(message));
    std::process::exit(1)
}

/// A JSON value, as much of it as the plan needs: anything but a non-negative integer, a
/// string, an array or an object is `Other` (parsed, so that it can be skipped).
enum Json {
    Int(u64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
    Other,
}

/// A small recursive-descent JSON parser over the plan line.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    /// The whole of `text` as one value, or None if it is not JSON.
    fn parse(text: &str) -> Option<Json> {
        let mut parser = Parser { text: text.as_bytes(), at: 0 };
        let value = parser.value()?;
        parser.skip_space();
        (parser.at == parser.text.len()).then_some(value)
    }

    fn skip_space(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.at += 1;
        }
    }

    /// Consumes `byte` (after any space) if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_space();
        let next = self.text.get(self.at) == Some(&byte);
        self.at += next as usize;
        next
    }

    /// The items of an array or object, each read by `item`, up to `close`.
    fn items<T>(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Some(items);
        }
        loop {
            items.push(item(self)?);
            if self.eat(close) {
                return Some(items);
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    fn value(&mut self) -> Option<Json> {
        if self.eat(b'{') {
            return self
                .items(b'}', |p| {
                    let key = p.string()?;
                    p.eat(b':').then_some(())?;
                    Some((key, p.value()?))
                })
                .map(Json::Object);
        }
        if self.eat(b'[') {
            return self.items(b']', Self::value).map(Json::Array);
        }
        if self.text.get(self.at) == Some(&b'"') {
            return self.string().map(Json::Str);
        }
        // A number or a literal: the bytes up to the next delimiter.
        let start = self.at;
        while matches!(self.text.get(self.at), Some(c) if !b",:]}[{\" \t\r\n".contains(c)) {
            self.at += 1;
        }
        let word = std::str::from_utf8(&self.text[start..self.at]).ok()?;
        match word.parse::<u64>() {
            Ok(n) if word.bytes().all(|b| b.is_ascii_digit()) => Some(Json::Int(n)),
            _ if matches!(word, "true" | "false" | "null") || word.parse::<f64>().is_ok() => Some(Json::Other),
            _ => None,
        }
    }

    fn string(&mut self) -> Option<String> {
        if !self.eat(b'"') {
            return None;
        }
        let mut out = Vec::new();
        loop {
            let byte = *self.text.get(self.at)?;
            self.at += 1;
            match byte {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let escaped = *self.text.get(self.at)?;
                    self.at += 1;
                    let c = match escaped {
                        b'"' | b'\\' | b'/' => escaped as char,
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let digits = std::str::from_utf8(self.text.get(self.at..self.at + 4)?).ok()?;
                            self.at += 4;
                            // A lone surrogate (half of a pair) becomes U+FFFD: no plan field holds one.
                            char::from_u32(u32::from_str_radix(digits, 16).ok()?).unwrap_or('\u{fffd}')
                        }
                        _ => return None,
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(byte),
            }
        }
    }
}

/// One point, from the plan line: what every handshake shares.
struct Plan {
    connections: u32,
    message_size: usize,
    handshake: Duration,
    max_pending: u32,
    challenge: [u8; CHALLENGE_BYTES],
}

/// The plan, and its senders' tokens.
fn read_plan(line: &str) -> Result<(Plan, Vec<[u8; TOKEN_BYTES]>), String> {
    // The start of the line is enough to tell which plan it was: its tokens can be many.
    let shown: String = line.trim_end().chars().take(120).collect();
    let fields = match Parser::parse(line) {
        Some(Json::Object(fields)) => fields,
        _ if line.is_empty() => return Err("no plan on stdin (it ended)".into()),
        _ => return Err(format!("bad plan {shown:?}: not a JSON object")),
    };
    let field = |key: &str| fields.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let int = |key: &str| match field(key) {
        Some(Json::Int(n)) => Some(*n),
        _ => None,
    };
    let (
        Some(2),
        Some(connections @ 1..=0xffff_ffff),
        Some(size @ 1..=0xffff_ffff),
        Some(handshake_ms),
        Some(max_pending),
    ) = (int("protocol"), int("connections"), int("message_size"), int("handshake_ms"), int("max_pending"))
    else {
        return Err(format!(
            "unsupported plan {shown:?}: protocol 2, connections and a message size above 0, handshake_ms and max_pending"
        ));
    };
    let bad = || format!("bad plan: a nonce and {connections} tokens of 64 hexadecimal digits were expected");
    let hex = |value: &Json| match value {
        Json::Str(text) => unhex(text),
        _ => None,
    };
    let nonce = field("nonce").and_then(hex).ok_or_else(bad)?;
    let tokens: Vec<[u8; TOKEN_BYTES]> = match field("tokens") {
        Some(Json::Array(tokens)) if tokens.len() as u64 == connections => {
            tokens.iter().map(hex).collect::<Option<_>>().ok_or_else(bad)?
        }
        _ => return Err(bad()),
    };
    let challenge = Challenge { nonce, connections: connections as u32, message_size: size as u32 }.to_bytes();
    let plan = Plan {
        connections: connections as u32,
        message_size: size as usize,
        handshake: Duration::from_millis(handshake_ms),
        max_pending: max_pending.clamp(1, u32::MAX as u64) as u32,
        challenge,
    };
    Ok((plan, tokens))
}

/// The point's plan, who has joined (the roll: the accept loop ends when all have), and how many
/// handshakes are pending.
struct Gate {
    plan: Plan,
    roll: Roll,
    admission: Admission,
}

impl Gate {
    fn all_joined(&self) -> bool {
        self.roll.joined() == self.plan.connections
    }

    /// The receiver's side of the handshake, by `accepted + handshake`: the sender's index, or
    /// why the connection is refused (after its verdict, when a whole hello came).
    fn handshake(&self, stream: &mut TcpStream, accepted: Instant) -> Result<u32, String> {
        let deadline = accepted + self.plan.handshake;
        // 48 bytes into a new connection's empty send buffer: this write does not block.
        stream.write_all(&self.plan.challenge).map_err(|e| format!("cannot send the challenge: {e}"))?;
        let mut hello = [0u8; HELLO_BYTES];
        let mut got = 0;
        while got < HELLO_BYTES {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "no hello within {} ms ({got} of {HELLO_BYTES} bytes)",
                    self.plan.handshake.as_millis()
                ));
            }
            if !readable(stream, left).map_err(|e| format!("poll failed: {e}"))? {
                continue; // the deadline (the poll rounds up), or an interrupted poll
            }
            // Readable: this read returns at once, and never reads beyond the hello.
            match stream.read(&mut hello[got..]) {
                Ok(0) => return Err(format!("closed after {got} of the {HELLO_BYTES} bytes of a hello")),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
        self.roll.judge(&hello).map_err(|refusal| {
            let _ = stream.write_all(refusal.verdict());
            refusal.to_string()
        })
    }
}

/// What one sender's connection carried.
#[derive(Default)]
struct Connection {
    index: u32,
    messages: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    error: Option<String>,
}

fn stranger(peer: &str, reason: &str) {
    // One println!, one line: stdout's lock keeps the lines of other threads apart.
    println!("{{\"type\":\"stranger\",\"peer\":{},\"reason\":{}}}", json::quoted(peer), json::quoted(reason));
}

/// The peer of a connection; WASI preview 1 has no getpeername, so std says "unsupported" there.
fn peer(stream: &TcpStream) -> String {
    match stream.peer_addr() {
        Ok(address) if !address.ip().is_unspecified() => address.to_string(),
        _ => "unknown".into(),
    }
}

fn serve(mut stream: TcpStream, index: u32, size: usize, clock: Instant) -> Connection {
    let mut report = Connection { index, ..Default::default() };
    let mut buffer = vec![0u8; size];
    loop {
        let mut filled = 0;
        while filled < size {
            match stream.read(&mut buffer[filled..]) {
                Ok(0) if filled == 0 => return report,
                Ok(0) => {
                    report.error = Some(format!("end of file after {filled} of {size} bytes of a message"));
                    return report;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    report.error = Some(format!("read failed: {e}"));
                    return report;
                }
            }
        }
        let t = clock.elapsed().as_nanos() as u64;
        report.first_ns.get_or_insert(t);
        report.last_ns = Some(t);
        report.messages += 1;
        if let Err(e) = stream.write_all(&buffer) {
            report.error = Some(format!("write failed: {e}"));
            return report;
        }
    }
}

/// Accepts until every sender has joined, each connection's handshake on its own thread; then
/// serves the joined ones. Returns once every connection (a stranger's too) is done.
fn run(listener: TcpListener, gate: &Gate, clock: Instant) -> Vec<Connection> {
    let plan = &gate.plan;
    let start = Barrier::new(plan.connections as usize);
    let join = |thread: std::thread::ScopedJoinHandle<Option<Connection>>| {
        thread.join().expect("a connection's thread panicked")
    };
    std::thread::scope(|scope| {
        let (mut threads, mut reports): (Vec<std::thread::ScopedJoinHandle<_>>, _) = (Vec::new(), Vec::new());
        while !gate.all_joined() {
            // A thread keeps its stack in linear memory until it is joined: the handshakes that
            // ended (strangers') are joined as they end, or a few hundred strangers would leave
            // no memory for another thread.
            let ended;
            (ended, threads) = threads.into_iter().partition(|t| t.is_finished());
            reports.extend(ended.into_iter().filter_map(join));
            // A connection waits to be accepted, or it is time to look at the count again.
            match readable(&listener, ACCEPT_POLL) {
                Ok(true) if !gate.all_joined() => {}
                Ok(_) => continue,
                Err(e) => fail(&format!("cannot poll the listening socket: {e}")),
            }
            let (mut stream, accepted) = match listener.accept() {
                Ok((stream, _)) => (stream, Instant::now()), // accept's address is 0.0.0.0:0 in WASI
                Err(e) => {
                    stranger("unknown", &format!("accept failed: {e}"));
                    // A lasting failure (no descriptors left) leaves the connection queued and
                    // the listener readable: not a busy loop of lines.
                    std::thread::sleep(ACCEPT_POLL);
                    continue;
                }
            };
            let peer = peer(&stream);
            if gate.all_joined() {
                // The last sender joined between the poll and this accept.
                stranger(&peer, "came after every sender had joined");
                continue;
            }
            if !gate.admission.admit() {
                stranger(&peer, "too many connections waiting for their handshake");
                continue;
            }
            let (start, thread_peer) = (&start, peer.clone());
            let thread = std::thread::Builder::new().spawn_scoped(scope, move || {
                let verdict = gate.handshake(&mut stream, accepted);
                gate.admission.release();
                let index = match verdict {
                    Ok(index) => index,
                    Err(why) => {
                        stranger(&thread_peer, &why);
                        return None;
                    }
                };
                // Every sender starts together, once the last has joined.
                start.wait();
                Some(match stream.write_all(JOINED) {
                    Ok(()) => serve(stream, index, plan.message_size, clock),
                    Err(e) => {
                        Connection { index, error: Some(format!("cannot start the sender: {e}")), ..Default::default() }
                    }
                })
            });
            match thread {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    gate.admission.release();
                    stranger(&peer, &format!("cannot start a thread for its handshake: {e}"));
                }
            }
        }
        // Every sender is here: closing fd 3 (the only descriptor of the listening socket once
        // taskmeter has let go of it) makes the kernel refuse a sender meant for the next point,
        // and reset any connection still waiting to be accepted. WASI cannot shut a listener down.
        drop(listener);
        reports.extend(threads.into_iter().filter_map(join));
        reports.sort_by_key(|c| c.index);
        reports
    })
}

fn main() {
    let mut line = String::new();
    if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
        fail(&format!("cannot read the plan: {e}"));
    }
    let gate = match read_plan(&line) {
        Ok((plan, tokens)) => Gate { roll: Roll::new(tokens), admission: Admission::new(plan.max_pending), plan },
        Err(message) => fail(&message),
    };
    // SAFETY: fd 3 is the preopened listening socket, by the protocol.
    let listener = unsafe { TcpListener::from_raw_fd(3) };
    // Before the hello: a runtime whose poll cannot wait on fd 3 fails at once, not at the first
    // connection.
    if let Err(e) = readable(&listener, Duration::ZERO) {
        fail(&format!("cannot poll fd 3, the listening socket: {e}"));
    }
    // EOF on stdin: taskmeter has gone or given up.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    // WASI has no getpid: taskmeter-wasm passes its own pid and runtime in the environment.
    let runtime = std::env::var("TASKMETER_HOST_RUNTIME").unwrap_or_else(|_| "an unknown WASI runtime".into());
    let pid = std::env::var("TASKMETER_HOST_PID").ok().and_then(|p| p.parse::<u32>().ok());
    println!(
        "{{\"type\":\"hello\",\"receiver\":\"wasm-thread\",\"runtime_version\":{},\"pid\":{}}}",
        json::quoted(&format!("wasm32-wasip1-threads on {runtime}")),
        pid.map_or("null".to_string(), |p| p.to_string())
    );
    let reports = run(listener, &gate, Instant::now());
    let mut out = std::io::stdout().lock();
    let number = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
    for c in &reports {
        let _ = writeln!(
            out,
            "{{\"type\":\"connection\",\"index\":{},\"messages\":{},\"first_ns\":{},\"last_ns\":{},\"error\":{}}}",
            c.index,
            c.messages,
            number(c.first_ns),
            number(c.last_ns),
            c.error.as_deref().map_or("null".to_string(), json::quoted)
        );
    }
    let total: u64 = reports.iter().map(|c| c.messages).sum();
    let _ = writeln!(out, "{{\"type\":\"done\",\"messages\":{total}}}");
}
