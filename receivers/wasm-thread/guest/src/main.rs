//! The wasm-thread receiver of `taskmeter run net` (net protocol 1, receivers/README.md), built
//! for `wasm32-wasip1-threads`: one std thread (a wasi-thread) per connection, each reading a
//! message, timing it and echoing it. The host (crates/taskmeter-wasm) preopens the listening
//! socket as fd 3.

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::wasi::io::FromRawFd;
use std::time::Instant;

#[derive(Default)]
struct Connection {
    messages: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    error: Option<String>,
}

fn fail(message: &str) -> ! {
    println!("{{\"type\":\"error\",\"message\":{}}}", quoted(message));
    std::process::exit(1)
}

fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => out.extend(['\\', c]),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out + "\""
}

/// The integer after `"key":` in the plan line.
fn field(plan: &str, key: &str) -> Option<u64> {
    let rest = &plan[plan.find(&format!("\"{key}\""))? + key.len() + 2..];
    let rest = rest[rest.find(':')? + 1..].trim_start();
    rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())].parse().ok()
}

fn serve(mut stream: TcpStream, size: usize, clock: Instant) -> Connection {
    let mut report = Connection::default();
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

fn main() {
    let mut plan = String::new();
    if std::io::stdin().lock().read_line(&mut plan).is_err() {
        fail("no plan on stdin");
    }
    let (protocol, connections, size) = (field(&plan, "protocol"), field(&plan, "connections"), field(&plan, "message_size"));
    let (Some(1), Some(connections @ 1..), Some(size @ 1..)) = (protocol, connections, size) else {
        fail("a plan of protocol 1 with connections and message_size above 0 was expected")
    };
    // SAFETY: fd 3 is the preopened listening socket, by the protocol.
    let listener = unsafe { TcpListener::from_raw_fd(3) };
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
        quoted(&format!("wasm32-wasip1-threads on {runtime}")),
        pid.map_or("null".to_string(), |p| p.to_string())
    );
    let clock = Instant::now();
    let mut threads = Vec::new();
    for _ in 0..connections {
        threads.push(match listener.accept() {
            Ok((stream, _)) => std::thread::Builder::new()
                .spawn(move || serve(stream, size as usize, clock))
                .map_err(|e| format!("cannot start a thread: {e}")),
            Err(e) => Err(format!("accept failed: {e}")),
        });
    }
    drop(listener); // every connection is here: a sender of the next point must not reach us
    let mut out = std::io::stdout().lock();
    let mut total = 0;
    let number = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
    for (index, thread) in threads.into_iter().enumerate() {
        let failed = |error: String| Connection { error: Some(error), ..Default::default() };
        let c = match thread {
            Ok(thread) => thread.join().unwrap_or_else(|_| failed("the thread panicked".into())),
            Err(error) => failed(error),
        };
        total += c.messages;
        let _ = writeln!(
            out,
            "{{\"type\":\"connection\",\"index\":{index},\"messages\":{},\"first_ns\":{},\"last_ns\":{},\"error\":{}}}",
            c.messages,
            number(c.first_ns),
            number(c.last_ns),
            c.error.as_deref().map_or("null".to_string(), quoted)
        );
    }
    let _ = writeln!(out, "{{\"type\":\"done\",\"messages\":{total}}}");
}
