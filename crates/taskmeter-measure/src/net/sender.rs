//! The senders: N connections, strict stop-and-wait. Each writes a message, then reads the ack
//! and checks that it is the same bytes; the round trip is timed at the sender on
//! CLOCK_MONOTONIC, from the start of the write to the end of the ack.

use super::handshake::{self, JoinError, Secret};
use crate::process::signals;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use taskmeter_clock::now_ns;

/// How often a sender waiting for an ack looks whether a signal asked taskmeter to stop.
const POLL: Duration = Duration::from_millis(100);

/// What one sender did.
#[derive(Debug, Default)]
pub struct SenderResult {
    pub planned: u64,
    pub sent: u64,
    pub acked: u64,
    pub round_trips_ns: Vec<i64>,
    pub error: Option<String>,
}

/// Connects every sender and has it join the point (the handshake: `secret` admits it), then
/// starts them together once the receiver says all have joined. A sender that cannot connect or
/// join, or loses its connection, reports why; the others go on.
pub fn send_all(
    to: SocketAddr,
    counts: &[u64],
    message_size: usize,
    timeout: Duration,
    secret: &Secret,
) -> Vec<SenderResult> {
    let start = Arc::new(Barrier::new(counts.len()));
    let connections = counts.len() as u32;
    let threads: Vec<_> = counts
        .iter()
        .enumerate()
        .map(|(i, &planned)| {
            let (start, secret) = (start.clone(), secret.clone());
            std::thread::Builder::new()
                .name(format!("sender-{i}"))
                .spawn(move || {
                    let joined = join(to, &secret, i as u32, connections, message_size, timeout);
                    start.wait();
                    match joined {
                        Ok(stream) => send(stream, i, planned, message_size, timeout),
                        Err(error) => SenderResult { planned, error: Some(error), ..Default::default() },
                    }
                })
                .expect("a sender thread starts")
        })
        .collect();
    threads
        .into_iter()
        .map(|t| {
            t.join().unwrap_or_else(|_| SenderResult { error: Some("a sender panicked".into()), ..Default::default() })
        })
        .collect()
}

/// Connects and joins, connecting again while the receiver is not there yet (refused) or closes
/// before its challenge (busy with strangers, or a receiver of the previous point), until
/// `timeout`.
fn join(
    to: SocketAddr,
    secret: &Secret,
    index: u32,
    connections: u32,
    message_size: usize,
    timeout: Duration,
) -> Result<TcpStream, String> {
    let deadline = Instant::now() + timeout;
    let size = u32::try_from(message_size).map_err(|_| "a message size above 4 GiB".to_string())?;
    loop {
        let mut stream = connect(to, timeout).map_err(|e| format!("sender {index} cannot connect to {to}: {e}"))?;
        match handshake::join(&mut stream, secret, index, connections, size, deadline) {
            Ok(()) => return Ok(stream),
            Err(JoinError::Again(_)) if Instant::now() < deadline && !signals::interrupted() => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(JoinError::Again(why) | JoinError::Refused(why)) => return Err(why),
        }
    }
}

/// Connects, retrying a refused connection until `timeout`: a receiver on another machine
/// (`net serve`) may still be starting its next point.
fn connect(to: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match TcpStream::connect_timeout(&to, timeout) {
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && std::time::Instant::now() < deadline
                    && !signals::interrupted() =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

fn send(mut stream: TcpStream, index: usize, planned: u64, message_size: usize, timeout: Duration) -> SenderResult {
    let mut result =
        SenderResult { planned, round_trips_ns: Vec::with_capacity(planned as usize), ..Default::default() };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(timeout.min(POLL)));
    let _ = stream.set_write_timeout(Some(timeout));
    let mut message = vec![0u8; message_size];
    let mut ack = vec![0u8; message_size];
    for seq in 0..planned {
        if let Some(reason) = signals::reason() {
            result.error = Some(format!("sender {index}: {reason} after {seq} messages"));
            break;
        }
        // A pattern that differs per sender and message, so an ack from the wrong place shows.
        let stamp = (index as u64) << 32 | seq;
        for (i, byte) in message.iter_mut().enumerate() {
            *byte = (stamp >> (8 * (i % 8))) as u8 ^ i as u8;
        }
        let t0 = now_ns();
        if let Err(e) = stream.write_all(&message) {
            result.error = Some(format!("sender {index}: write of message {seq} failed: {e}"));
            break;
        }
        result.sent += 1;
        if let Err(e) = read_ack(&mut stream, &mut ack, Instant::now() + timeout) {
            let why = match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("none within {} s", timeout.as_secs_f64())
                }
                _ => e.to_string(),
            };
            result.error = Some(format!("sender {index}: no ack for message {seq}: {why}"));
            break;
        }
        result.round_trips_ns.push((now_ns() - t0) as i64);
        if ack != message {
            result.error = Some(format!("sender {index}: the ack of message {seq} differs from the message"));
            break;
        }
        result.acked += 1;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    result
}

/// Reads a whole ack by `deadline`, in short waits so that a signal is seen within [`POLL`].
fn read_ack(stream: &mut TcpStream, ack: &mut [u8], deadline: Instant) -> std::io::Result<()> {
    let mut got = 0;
    while got < ack.len() {
        match stream.read(&mut ack[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) =>
            {
                if let Some(reason) = signals::reason() {
                    return Err(std::io::Error::other(reason));
                }
                if Instant::now() >= deadline {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
