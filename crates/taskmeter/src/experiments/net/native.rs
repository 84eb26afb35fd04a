//! The built-in receivers (`thread`, `tokio-mt`): `taskmeter net-receiver RUNTIME`, speaking net
//! protocol 1 (receivers/README.md) like every receiver in another language.

use crate::model::net::{ConnectionReport, NetPlan};
use taskmeter_record::clock::now_ns;
use std::io::{BufRead, Read, Write};
use std::os::fd::FromRawFd;

impl ConnectionReport {
    fn received(&mut self) {
        let t = now_ns();
        self.first_ns.get_or_insert(t);
        self.last_ns = Some(t);
        self.messages += 1;
    }
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

fn serve(runtime: &str) -> Result<(), String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| format!("cannot read the plan: {e}"))?;
    let plan: NetPlan = serde_json::from_str(&line).map_err(|e| format!("bad plan: {e}"))?;
    if plan.protocol != 1 || plan.message_size == 0 {
        return Err(format!("unsupported plan {line:?}: protocol 1 and a message size above 0"));
    }
    // SAFETY: fd 3 is ours by the protocol; it is checked to be a listening socket below.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(3) };
    listener.local_addr().map_err(|e| format!("fd 3 is not a listening TCP socket: {e}"))?;
    // EOF on stdin: taskmeter has gone or given up.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let version = taskmeter_worker::runtime::find(runtime).map(|r| (r.version)()).unwrap_or_default();
    println!("{}", serde_json::json!({"type": "hello", "receiver": runtime, "runtime_version": version, "pid": std::process::id()}));
    let reports = match runtime {
        "thread" => with_threads(listener, plan),
        "tokio-mt" => with_tokio(listener, plan)?,
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

fn with_threads(listener: std::net::TcpListener, plan: NetPlan) -> Vec<ConnectionReport> {
    let mut threads = Vec::new();
    for index in 0..plan.connections {
        match listener.accept() {
            Ok((stream, _)) => threads.push(std::thread::spawn(move || serve_blocking(stream, index, plan.message_size))),
            Err(e) => {
                let error = Some(format!("accept failed: {e}"));
                threads.push(std::thread::spawn(move || ConnectionReport { index, error, ..Default::default() }));
            }
        }
    }
    drop(listener); // every connection is here: a sender of the next point must not reach us
    threads.into_iter().map(|t| t.join().unwrap_or_default()).collect()
}

fn serve_blocking(mut stream: std::net::TcpStream, index: u32, size: usize) -> ConnectionReport {
    let _ = stream.set_nodelay(true);
    let mut report = ConnectionReport { index, ..Default::default() };
    let mut buffer = vec![0u8; size];
    loop {
        match read_message(&mut stream, &mut buffer) {
            Ok(false) => return report,
            Ok(true) => report.received(),
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

fn with_tokio(listener: std::net::TcpListener, plan: NetPlan) -> Result<Vec<ConnectionReport>, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_io().build().map_err(|e| format!("tokio: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| format!("fd 3: {e}"))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| format!("fd 3: {e}"))?;
        let mut tasks = Vec::new();
        for index in 0..plan.connections {
            let accepted = listener.accept().await;
            tasks.push(tokio::spawn(async move {
                let mut report = ConnectionReport { index, ..Default::default() };
                let mut stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => return ConnectionReport { error: Some(format!("accept failed: {e}")), ..report },
                };
                let _ = stream.set_nodelay(true);
                let mut buffer = vec![0u8; plan.message_size];
                loop {
                    // read_exact cannot tell a clean end from a cut message: read the first byte alone.
                    match stream.read(&mut buffer[..1]).await {
                        Ok(0) => return report,
                        Ok(_) => {}
                        Err(e) => return ConnectionReport { error: Some(format!("read failed: {e}")), ..report },
                    }
                    if let Err(e) = stream.read_exact(&mut buffer[1..]).await {
                        return ConnectionReport { error: Some(format!("a message was cut short: {e}")), ..report };
                    }
                    report.received();
                    if let Err(e) = stream.write_all(&buffer).await {
                        return ConnectionReport { error: Some(format!("write failed: {e}")), ..report };
                    }
                }
            }));
        }
        drop(listener);
        let mut reports = Vec::new();
        for task in tasks {
            reports.push(task.await.unwrap_or_default());
        }
        Ok(reports)
    })
}
