//! The built-in receivers (`thread`, `tokio-mt`): `taskmeter net-receiver RUNTIME`, speaking net
//! protocol 2 (receivers/README.md) like every receiver in another language: each accepted
//! connection gets its handshake concurrently, the joined senders start together, strangers are
//! refused and reported.

use super::handshake;
use std::io::{BufRead, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use taskmeter_clock::now_ns;
use taskmeter_model::net::{ConnectionReport, NetPlan};
use taskmeter_net_protocol::{unhex, Admission, Challenge, Roll, CHALLENGE_BYTES, HELLO_BYTES, JOINED};

/// One message more on a connection, at the protocol's clock.
fn received(report: &mut ConnectionReport) {
    let t = now_ns();
    report.first_ns.get_or_insert(t);
    report.last_ns = Some(t);
    report.messages += 1;
}

/// Runs a built-in receiver; returns the exit status.
pub fn main(runtime: &str) -> u8 {
    match serve(runtime) {
        Ok(()) => 0,
        Err(message) => {
            println!("{}", serde_json::json!({"type": "error", "message": message}));
            1
        }
    }
}

/// What every handshake of a point shares: the challenge, the tokens and who has joined (the
/// roll), how many handshakes are pending.
struct Gate {
    challenge: [u8; CHALLENGE_BYTES],
    roll: Roll,
    deadline: Duration,
    admission: Admission,
}

impl Gate {
    fn new(plan: &NetPlan) -> Result<Gate, String> {
        let bad =
            || format!("bad plan: a nonce and {} tokens of 64 hexadecimal digits were expected", plan.connections);
        let nonce = unhex(&plan.nonce).ok_or_else(bad)?;
        let tokens: Vec<[u8; 32]> = plan.tokens.iter().map(|t| unhex(t)).collect::<Option<_>>().ok_or_else(bad)?;
        if tokens.len() != plan.connections as usize {
            return Err(bad());
        }
        Ok(Gate {
            challenge: Challenge { nonce, connections: plan.connections, message_size: plan.message_size as u32 }
                .to_bytes(),
            roll: Roll::new(tokens),
            deadline: Duration::from_millis(plan.handshake_ms),
            admission: Admission::new(plan.max_pending),
        })
    }

    /// Takes a handshake slot, or says the connection must be refused at once.
    fn admit(&self) -> bool {
        self.admission.admit()
    }

    /// Judges a hello: the sender's index, or the verdict to send and why.
    fn judge(&self, hello: &[u8; HELLO_BYTES]) -> Result<u32, (&'static [u8; 8], String)> {
        self.roll.judge(hello).map_err(|refusal| (refusal.verdict(), refusal.to_string()))
    }
}

fn stranger(peer: &str, reason: &str) {
    println!("{}", serde_json::json!({"type": "stranger", "peer": peer, "reason": reason}));
}

fn serve(runtime: &str) -> Result<(), String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| format!("cannot read the plan: {e}"))?;
    let plan: NetPlan = serde_json::from_str(&line).map_err(|e| format!("bad plan: {e}"))?;
    if plan.protocol != 2 || plan.message_size == 0 || plan.connections == 0 {
        return Err(format!("unsupported plan {line:?}: protocol 2, connections and a message size above 0"));
    }
    let gate = Gate::new(&plan)?;
    // SAFETY: fd 3 is ours by the protocol; it is checked to be a listening socket below.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(3) };
    listener.local_addr().map_err(|e| format!("fd 3 is not a listening TCP socket: {e}"))?;
    // EOF on stdin: taskmeter has gone or given up.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let version = taskmeter_worker::runtime::find(runtime).map(|r| (r.version)()).unwrap_or_default();
    println!(
        "{}",
        serde_json::json!({"type": "hello", "receiver": runtime, "runtime_version": version, "pid": std::process::id()})
    );
    let reports = match runtime {
        "thread" => with_threads(listener, &plan, gate),
        "tokio-mt" => with_tokio(listener, &plan, gate)?,
        other => return Err(format!("no built-in receiver '{other}'")),
    };
    let mut out = std::io::stdout().lock();
    for report in &reports {
        let mut line = serde_json::to_value(report).expect("a report serialises");
        line["type"] = "connection".into();
        let _ = writeln!(out, "{line}");
    }
    let total: u64 = reports.iter().map(|r| r.messages).sum();
    let _ = writeln!(out, "{}", serde_json::json!({"type": "done", "messages": total}));
    Ok(())
}

/// Stops accepting: wakes the accept that waits (Linux returns EINVAL to it) and refuses any
/// later connection.
fn stop_listening(listener: &impl AsRawFd) {
    // SAFETY: shutdown on the listening socket we own.
    unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
}

fn with_threads(listener: std::net::TcpListener, plan: &NetPlan, gate: Gate) -> Vec<ConnectionReport> {
    use std::sync::Arc;
    let (gate, listener) = (Arc::new(gate), Arc::new(listener));
    let start = Arc::new(std::sync::Barrier::new(plan.connections as usize));
    let (done, reports) = std::sync::mpsc::channel();
    let joined = Arc::new(AtomicU32::new(0));
    let (connections, size) = (plan.connections, plan.message_size);
    while joined.load(Ordering::SeqCst) < connections {
        let (mut stream, peer) = match listener.accept() {
            Ok((stream, peer)) => (stream, peer.to_string()),
            Err(_) if joined.load(Ordering::SeqCst) == connections => break,
            Err(e) => {
                stranger("unknown", &format!("accept failed: {e}"));
                // A lasting failure (no file descriptors left) must not become a flood of lines.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if !gate.admit() {
            stranger(&peer, "too many connections waiting for their handshake");
            continue;
        }
        // Detached: a stranger's thread is gone (and its stack freed) when its handshake is,
        // however long `net serve` waits.
        let (gate, start, done, joined, listener) =
            (gate.clone(), start.clone(), done.clone(), joined.clone(), listener.clone());
        std::thread::spawn(move || {
            let verdict = handshake_blocking(&mut stream, &gate);
            gate.admission.release();
            let index = match verdict {
                Ok(index) => index,
                Err(why) => return stranger(&peer, &why),
            };
            if joined.fetch_add(1, Ordering::SeqCst) + 1 == connections {
                stop_listening(&*listener); // every sender is here: one of the next point must not reach us
            }
            start.wait();
            let report = match stream.write_all(JOINED) {
                Ok(()) => serve_blocking(stream, index, size),
                Err(e) => ConnectionReport {
                    index,
                    error: Some(format!("cannot start the sender: {e}")),
                    ..Default::default()
                },
            };
            let _ = done.send(report);
        });
    }
    drop(done);
    // One report per joined sender (a stranger's thread sends none); its last sender is dropped
    // by the last serving thread.
    let mut reports: Vec<ConnectionReport> = reports.iter().take(connections as usize).collect();
    reports.sort_by_key(|r| r.index);
    reports
}

/// The receiver's side of the handshake, within the gate's deadline: the sender's index, or why
/// the connection is refused (after its verdict, when it got as far as a hello).
fn handshake_blocking(stream: &mut std::net::TcpStream, gate: &Gate) -> Result<u32, String> {
    let deadline = Instant::now() + gate.deadline;
    let _ = stream.set_write_timeout(Some(gate.deadline));
    stream.write_all(&gate.challenge).map_err(|e| format!("cannot send the challenge: {e}"))?;
    let mut hello = [0u8; HELLO_BYTES];
    handshake::read_full(stream, &mut hello, deadline).map_err(|(got, e)| match e.kind() {
        std::io::ErrorKind::TimedOut => {
            format!("no hello within {} ms ({got} of {HELLO_BYTES} bytes)", gate.deadline.as_millis())
        }
        std::io::ErrorKind::UnexpectedEof => format!("closed after {got} of the {HELLO_BYTES} bytes of a hello"),
        _ => format!("read failed: {e}"),
    })?;
    let _ = (stream.set_read_timeout(None), stream.set_write_timeout(None));
    gate.judge(&hello).map_err(|(verdict, why)| {
        let _ = stream.write_all(verdict);
        why
    })
}

fn serve_blocking(mut stream: std::net::TcpStream, index: u32, size: usize) -> ConnectionReport {
    let _ = stream.set_nodelay(true);
    let mut report = ConnectionReport { index, ..Default::default() };
    let mut buffer = vec![0u8; size];
    loop {
        match read_message(&mut stream, &mut buffer) {
            Ok(false) => return report,
            Ok(true) => received(&mut report),
            Err(e) => return ConnectionReport { error: Some(e), ..report },
        }
        if let Err(e) = stream.write_all(&buffer) {
            return ConnectionReport { error: Some(format!("write failed: {e}")), ..report };
        }
    }
}

/// Reads one whole message: false at a clean end-of-file before it, an error in its middle.
fn read_message(stream: &mut impl Read, buffer: &mut [u8]) -> Result<bool, String> {
    let mut filled = 0;
    while filled < buffer.len() {
        match stream.read(&mut buffer[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(format!("end of file after {filled} of {} bytes of a message", buffer.len())),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read failed: {e}")),
        }
    }
    Ok(true)
}

fn with_tokio(listener: std::net::TcpListener, plan: &NetPlan, gate: Gate) -> Result<Vec<ConnectionReport>, String> {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| format!("fd 3: {e}"))?;
    let (connections, size) = (plan.connections, plan.message_size);
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| format!("fd 3: {e}"))?;
        let gate = Arc::new(gate);
        let start = Arc::new(tokio::sync::Barrier::new(connections as usize));
        let all_joined = Arc::new(tokio::sync::Notify::new());
        let joined = Arc::new(AtomicU32::new(0));
        let (done, mut reports) = tokio::sync::mpsc::unbounded_channel();
        let listener = Arc::new(listener);
        let accepting = listener.clone();
        let notify = all_joined.clone();
        let acceptor = tokio::spawn(async move {
            loop {
                let (mut stream, peer) = match accepting.accept().await {
                    Ok((stream, peer)) => (stream, peer.to_string()),
                    Err(e) => {
                        stranger("unknown", &format!("accept failed: {e}"));
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                if !gate.admit() {
                    stranger(&peer, "too many connections waiting for their handshake");
                    continue;
                }
                let (gate, start, all_joined, joined, done) =
                    (gate.clone(), start.clone(), notify.clone(), joined.clone(), done.clone());
                tokio::spawn(async move {
                    let verdict = tokio::time::timeout(gate.deadline, async {
                        stream
                            .write_all(&gate.challenge)
                            .await
                            .map_err(|e| format!("cannot send the challenge: {e}"))?;
                        let mut hello = [0u8; HELLO_BYTES];
                        stream.read_exact(&mut hello).await.map_err(|e| format!("no whole hello: {e}"))?;
                        match gate.judge(&hello) {
                            Ok(index) => Ok(index),
                            Err((verdict, why)) => {
                                let _ = stream.write_all(verdict).await;
                                Err(why)
                            }
                        }
                    })
                    .await
                    .unwrap_or_else(|_| Err(format!("no hello within {} ms", gate.deadline.as_millis())));
                    gate.admission.release();
                    let index = match verdict {
                        Ok(index) => index,
                        Err(why) => return stranger(&peer, &why),
                    };
                    if joined.fetch_add(1, Ordering::SeqCst) + 1 == connections {
                        all_joined.notify_one();
                    }
                    start.wait().await;
                    let mut report = ConnectionReport { index, ..Default::default() };
                    if let Err(e) = stream.write_all(JOINED).await {
                        let _ = done
                            .send(ConnectionReport { error: Some(format!("cannot start the sender: {e}")), ..report });
                        return;
                    }
                    let _ = stream.set_nodelay(true);
                    let mut buffer = vec![0u8; size];
                    let report = loop {
                        // read_exact cannot tell a clean end from a cut message: read the first byte alone.
                        match stream.read(&mut buffer[..1]).await {
                            Ok(0) => break report,
                            Ok(_) => {}
                            Err(e) => break ConnectionReport { error: Some(format!("read failed: {e}")), ..report },
                        }
                        if let Err(e) = stream.read_exact(&mut buffer[1..]).await {
                            break ConnectionReport { error: Some(format!("a message was cut short: {e}")), ..report };
                        }
                        received(&mut report);
                        if let Err(e) = stream.write_all(&buffer).await {
                            break ConnectionReport { error: Some(format!("write failed: {e}")), ..report };
                        }
                    };
                    let _ = done.send(report);
                });
            }
        });
        all_joined.notified().await;
        acceptor.abort();
        let _ = acceptor.await;
        // Every sender is here: one of the next point must not reach us. (The aborted acceptor
        // took the last sender of reports with it: the channel ends with the last connection.)
        stop_listening(&listener);
        drop(listener);
        let mut all = Vec::new();
        while let Some(report) = reports.recv().await {
            all.push(report);
        }
        all.sort_by_key(|r| r.index);
        Ok(all)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use taskmeter_net_protocol::HELLO_MAGIC;

    fn gate(deadline_ms: u64) -> Gate {
        Gate {
            challenge: [7; CHALLENGE_BYTES],
            roll: Roll::new(vec![[1; 32]]),
            deadline: Duration::from_millis(deadline_ms),
            admission: Admission::new(1),
        }
    }

    /// The receiver's end of a connection whose sender's end does `peer` (after reading the
    /// challenge), and what the handshake made of it.
    fn handshake_with(gate: &Gate, peer: impl FnOnce(&mut TcpStream) + Send + 'static) -> Result<u32, String> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let sender = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(address).unwrap();
            stream.read_exact(&mut [0; CHALLENGE_BYTES]).unwrap();
            peer(&mut stream);
            stream // held open until the receiver is done
        });
        let (mut stream, _) = listener.accept().unwrap();
        let result = handshake_blocking(&mut stream, gate);
        drop(sender.join().unwrap());
        result
    }

    #[test]
    fn a_hello_that_is_whole_late_cut_or_wrong_is_judged_with_its_byte_count() {
        let hello = |token: [u8; 32]| {
            let mut hello = HELLO_MAGIC.to_vec();
            hello.extend_from_slice(&0u32.to_le_bytes());
            hello.extend_from_slice(&token);
            hello
        };
        let (right, wrong) = (hello([1; 32]), hello([2; 32]));
        assert_eq!(handshake_with(&gate(5_000), move |s| s.write_all(&right).unwrap()), Ok(0));
        assert_eq!(
            handshake_with(&gate(5_000), move |s| s.write_all(&wrong).unwrap()),
            Err("wrong token for sender 0".into())
        );
        assert_eq!(handshake_with(&gate(50), |_| {}), Err("no hello within 50 ms (0 of 44 bytes)".into()));
        let cut = |s: &mut TcpStream| {
            s.write_all(&HELLO_MAGIC[..]).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
        };
        assert_eq!(handshake_with(&gate(5_000), cut), Err("closed after 8 of the 44 bytes of a hello".into()));
    }
}
