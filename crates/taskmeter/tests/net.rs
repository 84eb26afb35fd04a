//! `taskmeter run net`, `net serve` and `net send` as a user meets them: every message checked,
//! faults fail their own point within a bounded wait, bad input refused.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::{assert_refused, stderr, stdout, taskmeter, Background, Finished};

fn net_json(folder: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(folder.join("net.json")).unwrap()).unwrap()
}

fn points<'a>(record: &'a serde_json::Value, receiver: &str) -> Vec<&'a serde_json::Value> {
    record["points"].as_array().unwrap().iter().filter(|p| p["receiver"] == receiver).collect()
}

/// A shell script standing in for a receiver.
fn fake_receiver(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn every_native_receiver_acknowledges_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let native = common::receivers_where(|r| !r.id.starts_with("wasm-"));
    let output = taskmeter()
        .args([
            "run",
            "net",
            "--repeat",
            "1",
            "--receivers",
            &native.join(","),
            "--senders",
            "1,3",
            "--messages",
            "301",
            "--message-size",
            "100",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let record = net_json(&out);
    for receiver in &native {
        let points = points(&record, receiver);
        assert_eq!(points.len(), 2, "{receiver}");
        for p in points {
            assert_eq!(p["error"], serde_json::Value::Null, "{p}");
            for field in ["messages_planned", "messages_sent", "messages_acked", "messages_received"] {
                assert_eq!(p[field], 301, "{receiver} {field}");
            }
            let connections = p["connections"].as_array().unwrap();
            assert_eq!(connections.len(), p["senders"].as_u64().unwrap() as usize);
            let per_connection: Vec<u64> = connections.iter().map(|c| c["messages"].as_u64().unwrap()).collect();
            if p["senders"] == 3 {
                let mut sorted = per_connection.clone();
                sorted.sort();
                assert_eq!(sorted, vec![100, 100, 101], "301 split over 3 senders");
            }
            assert!(p["throughput"].as_f64().unwrap() > 0.0);
            assert!(p["round_trip"]["p50"].as_i64().unwrap() <= p["round_trip"]["p99"].as_i64().unwrap());
        }
        assert_eq!(points_ratio(&record, receiver, 1), 1.0, "the 1-sender point is its own base");
    }
    for file in ["summary.csv", "report.html", "charts/ratio.svg", "charts/throughput.svg", "charts/round-trip-p99.svg"]
    {
        assert!(out.join(file).is_file(), "{file}");
    }
    assert_eq!(std::fs::read_to_string(out.join("summary.csv")).unwrap().lines().count(), 1 + 8);
    // The charts and report.html come back from net.json alone.
    std::fs::remove_dir_all(out.join("charts")).unwrap();
    std::fs::remove_file(out.join("report.html")).unwrap();
    let rebuilt = taskmeter().arg("report").arg(&out).output().unwrap();
    assert!(rebuilt.status.success(), "{}", stderr(&rebuilt));
    assert!(out.join("charts/ratio.svg").is_file() && out.join("report.html").is_file());
    let text = stdout(&output);
    assert!(text.contains("throughput / the receiver's own 1-sender throughput"), "{text}");
}

fn points_ratio(record: &serde_json::Value, receiver: &str, senders: u64) -> f64 {
    points(record, receiver).into_iter().find(|p| p["senders"] == senders).unwrap()["ratio"].as_f64().unwrap()
}

#[test]
fn per_sender_mode_sends_the_count_from_every_sender() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = taskmeter()
        .args([
            "run",
            "net",
            "--repeat",
            "1",
            "--receivers",
            "thread",
            "--senders",
            "4",
            "--messages",
            "25",
            "--per-sender",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let record = net_json(&out);
    assert_eq!(points(&record, "thread")[0]["messages_received"], 100);
    assert_eq!(record["settings"]["per_sender"], true);
}

#[test]
fn a_receiver_that_crashes_or_stops_acknowledging_fails_its_point_only() {
    let dir = tempfile::tempdir().unwrap();
    let hello = r#"read plan; echo '{"type":"hello","receiver":"fake","runtime_version":"sh","pid":1}'"#;
    let crash = fake_receiver(dir.path(), "crash", &format!("{hello}\necho 'boom' >&2\nexit 3"));
    let silent = fake_receiver(dir.path(), "silent", &format!("{hello}\nsleep 60"));
    let out = dir.path().join("out");
    let started = Instant::now();
    let output = taskmeter()
        .env("TASKMETER_RECEIVER_GO", &crash)
        .env("TASKMETER_RECEIVER_C_THREAD", &silent)
        .args([
            "run",
            "net",
            "--repeat",
            "1",
            "--receivers",
            "go,c-thread,thread",
            "--senders",
            "2",
            "--messages",
            "20",
            "--grace",
            "1s",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(50), "a bounded wait, not the fake receiver's 60 s");
    let record = net_json(&out);
    let crashed = points(&record, "go")[0]["error"].as_str().unwrap().to_string();
    assert!(
        crashed.contains("exited with status 3") || crashed.contains("cannot connect") || crashed.contains("no ack"),
        "{crashed}"
    );
    let silent_error = points(&record, "c-thread")[0]["error"].as_str().unwrap().to_string();
    assert!(silent_error.contains("sent no taskmeter challenge"), "{silent_error}");
    assert_eq!(points(&record, "thread")[0]["error"], serde_json::Value::Null, "the other receivers are kept");
    let leftover = std::process::Command::new("pgrep").args(["-f", silent.to_str().unwrap()]).output().unwrap();
    assert!(leftover.stdout.is_empty(), "no receiver process is left behind");
}

#[test]
fn a_receiver_that_cannot_start_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let broken = fake_receiver(
        dir.path(),
        "broken",
        r#"read plan; echo '{"type":"error","message":"fd 3 is not a socket"}'; exit 1"#,
    );
    let out = dir.path().join("out");
    let output = taskmeter()
        .env("TASKMETER_RECEIVER_GO", &broken)
        .args(["run", "net", "--repeat", "1", "--receivers", "go", "--senders", "1", "--messages", "5", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let error = points(&net_json(&out), "go")[0]["error"].as_str().unwrap().to_string();
    assert!(error.contains("the receiver did not start: fd 3 is not a socket"), "{error}");
}

/// A free port on loopback (bound, then released for `net serve` to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `net serve ARGS` in the background.
fn start_serve(args: &[&str], env: &[(&str, &Path)]) -> Background {
    Background::start(&[&["net", "serve"], args].concat(), env)
}

fn send(port: u16, credentials: &[&str], load: &[&str]) -> std::process::Output {
    taskmeter()
        .args(["net", "send", "--to", &format!("127.0.0.1:{port}")])
        .args(credentials)
        .args(load)
        .output()
        .unwrap()
}

/// `net send` with the session cookie in its environment (never on its command line).
fn send_with_cookie(port: u16, cookie: &str, load: &[&str]) -> std::process::Output {
    taskmeter()
        .args(["net", "send", "--to", &format!("127.0.0.1:{port}")])
        .env("TASKMETER_NET_COOKIE", cookie)
        .args(load)
        .output()
        .unwrap()
}

#[test]
fn serve_and_send_on_two_sides() {
    let port = free_port();
    let serve = start_serve(
        &["--receiver", "c-thread", "--listen", &format!("127.0.0.1:{port}"), "--senders", "1,2", "--messages", "50"],
        &[],
    );
    // The senders wait for the receiver to listen, at each point.
    let sent = send_with_cookie(port, &serve.cookie(), &["--senders", "1,2", "--messages", "50"]);
    assert!(sent.status.success(), "{}{}", stdout(&sent), stderr(&sent));
    let text = stdout(&sent);
    assert!(
        text.contains("1 senders: 50 of 50 messages acknowledged") && text.contains("2 senders: 50 of 50"),
        "{text}"
    );
    let Finished { status, stdout: out, stderr: err } = serve.finish();
    assert!(status.success(), "{err}");
    assert!(out.contains("2 senders: 50 messages in"), "{out}");
    assert!(
        err.contains(&format!("listening on 127.0.0.1:{port}; no key: the session cookie admits senders")),
        "{err}"
    );
}

/// The connections a stray client makes: an HTTP request, random bytes, one that sends
/// nothing, a hello with the right magic and a wrong token, and `crowd` at once.
fn strangers(port: u16, crowd: usize) -> std::thread::JoinHandle<()> {
    use std::io::Write;
    std::thread::spawn(move || {
        let address: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let connect = || std::net::TcpStream::connect_timeout(&address, Duration::from_secs(5)).ok();
        let mut held = Vec::new();
        for bytes in [&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..], &[0x5au8; 100][..], &[][..]] {
            if let Some(mut stream) = connect() {
                let _ = stream.write_all(bytes);
                held.push(stream);
            }
        }
        let mut wrong = b"TMNET2H\0".to_vec();
        wrong.extend_from_slice(&0u32.to_le_bytes());
        wrong.extend_from_slice(&[0u8; 32]);
        if let Some(mut stream) = connect() {
            let _ = stream.write_all(&wrong);
            held.push(stream);
        }
        held.extend((0..crowd).filter_map(|_| connect()));
        // Held open past the handshake's 2 s: the receiver must not wait for them.
        std::thread::sleep(Duration::from_secs(3));
    })
}

/// Lets the test hold a thousand sockets.
fn raise_open_files() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(65536);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}

#[test]
fn strangers_never_join_and_every_message_of_the_senders_is_acknowledged() {
    raise_open_files();
    for receiver in &common::receivers_where(|_| true) {
        let receiver = receiver.as_str();
        // The built-in receiver takes the full crowd of the issue; the others a smaller one.
        let crowd = if receiver == "thread" { 1000 } else { 100 };
        let port = free_port();
        let serve = start_serve(
            &[
                "--receiver",
                receiver,
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--senders",
                "2",
                "--messages",
                "20000",
            ],
            &[],
        );
        let cookie = serve.cookie();
        serve.wait_for_stderr("waiting for 2 sender(s)");
        let strays = strangers(port, crowd);
        std::thread::sleep(Duration::from_millis(300)); // the strays first
        let sent = send_with_cookie(port, &cookie, &["--senders", "2", "--messages", "20000"]);
        assert!(sent.status.success(), "{receiver}: {}{}", stdout(&sent), stderr(&sent));
        assert!(stdout(&sent).contains("20000 of 20000 messages acknowledged"), "{receiver}: {}", stdout(&sent));
        strays.join().unwrap();
        let Finished { status, stdout: out, stderr: err } = serve.finish();
        assert!(status.success(), "{receiver}: {out}{err}");
        assert!(out.contains("2 senders: 20000 messages in"), "{receiver}: {out}");
        let refused = err.lines().filter(|l| l.starts_with("taskmeter: refused a connection from ")).count();
        assert!(refused >= 4, "{receiver}: every stranger is said, with its peer:\n{err}");
        assert!(err.contains("wrong token for sender 0"), "{receiver}: {err}");
        assert!(out.contains("connection(s) refused"), "{receiver}: {out}");
    }
}

#[test]
fn a_connection_during_a_point_never_joins_and_the_point_is_measured_in_full() {
    use std::io::Read;
    let port = free_port();
    let serve = start_serve(
        &["--receiver", "thread", "--listen", &format!("127.0.0.1:{port}"), "--senders", "2", "--messages", "300000"],
        &[],
    );
    let cookie = serve.cookie();
    serve.wait_for_stderr("waiting for 2 sender(s)");
    let sender =
        std::thread::spawn(move || send_with_cookie(port, &cookie, &["--senders", "2", "--messages", "300000"]));
    std::thread::sleep(Duration::from_millis(500));
    // Refused by the kernel once every sender has joined (the receiver stopped listening), or
    // by the handshake before: either way it is closed, never served.
    for _ in 0..10 {
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest);
            assert!(rest.len() <= 48, "at most a challenge reaches a stranger");
        }
    }
    let sent = sender.join().unwrap();
    assert!(
        sent.status.success() && stdout(&sent).contains("300000 of 300000 messages acknowledged"),
        "{}",
        stdout(&sent)
    );
    let Finished { status, stdout: out, .. } = serve.finish();
    assert!(status.success() && out.contains("2 senders: 300000 messages in"), "{out}");
}

#[test]
fn a_sender_with_the_wrong_key_or_cookie_and_a_port_that_is_not_a_receiver_get_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (key, other) = (dir.path().join("key"), dir.path().join("other"));
    std::fs::write(&key, [7u8; 32]).unwrap();
    std::fs::write(&other, [8u8; 32]).unwrap();
    let (cookie, bad_cookie) = (dir.path().join("cookie"), dir.path().join("bad-cookie"));
    std::fs::write(&cookie, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::write(&bad_cookie, "xyz\n").unwrap();
    let port = free_port();
    let serve = start_serve(
        &[
            "--receiver",
            "thread",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--senders",
            "1",
            "--messages",
            "100",
            "--key-file",
            key.to_str().unwrap(),
        ],
        &[],
    );
    serve.wait_for_stderr("waiting for 1 sender(s)");
    assert!(serve.stderr().contains("a key is required"));
    let load = ["--senders", "1", "--messages", "100"];
    for credentials in [vec!["--key-file", other.to_str().unwrap()], vec!["--cookie-file", cookie.to_str().unwrap()]] {
        let refused = send(port, &credentials, &load);
        assert_eq!(refused.status.code(), Some(1), "{credentials:?}");
        assert!(
            stdout(&refused).contains("refused sender 0: wrong cookie or key"),
            "{credentials:?}: {}",
            stdout(&refused)
        );
    }
    let sent = send(port, &["--key-file", key.to_str().unwrap()], &load);
    assert!(sent.status.success(), "{}", stdout(&sent));
    let Finished { status, stderr: err, .. } = serve.finish();
    assert!(status.success(), "{err}");
    assert_eq!(err.matches("wrong token for sender 0").count(), 2, "{err}");

    // Not a taskmeter receiver: one that answers something else, one that says nothing.
    for (answer, expected) in [
        (
            Some("HTTP/1.1 400 Bad Request\r\n\r\n"),
            "is not a taskmeter receiver: it answered \"HTTP/1.1 400 Bad Request",
        ),
        (None, "sent no taskmeter challenge"),
    ] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut held = Vec::new();
            for mut stream in listener.incoming().flatten() {
                if let Some(text) = answer {
                    let _ = stream.write_all(text.as_bytes());
                }
                held.push(stream);
            }
        });
        let started = Instant::now();
        let output = send(port, &["--cookie-file", cookie.to_str().unwrap()], &load);
        assert_eq!(output.status.code(), Some(1));
        assert!(stdout(&output).contains(expected), "{}", stdout(&output));
        assert!(started.elapsed() < Duration::from_secs(60), "bounded");
    }
    assert_refused(&[
        (
            vec!["net", "send", "--to", "127.0.0.1:1", "--cookie-file", bad_cookie.to_str().unwrap()],
            "is not the 32 hexadecimal digits `net serve` prints: it holds characters other than hexadecimal digits",
        ),
        (vec!["net", "send", "--to", "127.0.0.1:1", "--cookie", "xyz"], "takes no session cookie on its command line"),
        (vec!["net", "send", "--to", "127.0.0.1:1"], "--cookie-file FILE"),
        (vec!["net", "serve", "--key-file", "/nonexistent/key"], "cannot read the key file /nonexistent/key"),
    ]);
}

#[test]
fn a_port_in_use_and_bad_flags_are_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let output = taskmeter()
        .args(["net", "serve", "--receiver", "thread", "--listen", &address, "--senders", "1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with("taskmeter: cannot listen on") && stderr(&output).lines().count() == 1,
        "{}",
        stderr(&output)
    );
    assert_refused(&[
        (vec!["run", "net", "--senders", "0"], "invalid sender count '0'"),
        (vec!["run", "net", "--senders", "5..1"], "starts above its end"),
        (vec!["run", "net", "--receivers", "nope"], "unknown receiver 'nope'"),
        (vec!["run", "net", "--sleep", "fixed:1ms"], "--sleep does not apply to `run net`"),
        (vec!["run", "net", "--message-size", "0"], "--message-size"),
        (vec!["net", "send", "--to", "nowhere"], "--to"),
    ]);
}

#[test]
fn the_webassembly_receiver_acknowledges_every_message() {
    // Builds the guest and the wasmtime host on first use (minutes, once per machine).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = taskmeter()
        .args([
            "run",
            "net",
            "--repeat",
            "1",
            "--receivers",
            "wasm-thread,wasm-go",
            "--senders",
            "1,4",
            "--messages",
            "400",
            "--message-size",
            "512",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let record = net_json(&out);
    assert_eq!(record["points"].as_array().unwrap().len(), 4);
    for p in record["points"].as_array().unwrap() {
        assert_eq!(p["error"], serde_json::Value::Null, "{p}");
        assert_eq!((p["messages_acked"].as_u64(), p["messages_received"].as_u64()), (Some(400), Some(400)), "{p}");
        assert_eq!(p["connections"].as_array().unwrap().len() as u64, p["senders"].as_u64().unwrap());
    }
    // A guest that is not WebAssembly fails its point, with wasmtime's reason.
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm-host/release/taskmeter-wasm");
    std::fs::write(dir.path().join("garbage.wasm"), "not wasm").unwrap();
    let bad = fake_receiver(
        dir.path(),
        "bad-guest",
        &format!("exec {} {}", host.display(), dir.path().join("garbage.wasm").display()),
    );
    let out = dir.path().join("bad");
    let output = taskmeter()
        .env("TASKMETER_RECEIVER_WASM_THREAD", &bad)
        .args(["run", "net", "--repeat", "1", "--receivers", "wasm-thread", "--senders", "1", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let error = points(&net_json(&out), "wasm-thread")[0]["error"].as_str().unwrap().to_string();
    assert!(error.contains("cannot load the guest") && error.contains("garbage.wasm"), "{error}");
}

#[test]
fn a_missing_rust_target_makes_the_wasm_receiver_unavailable_and_skipped() {
    // A rustc whose sysroot has no wasm32-wasip1-threads, as on a machine where rustup never added it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sysroot/lib/rustlib/x86_64-unknown-linux-gnu/lib")).unwrap();
    let rustc = fake_receiver(dir.path(), "rustc", &format!("echo {}", dir.path().join("sysroot").display()));
    let output = taskmeter().env("RUSTC", &rustc).arg("list").output().unwrap();
    // The reason wraps at 100 columns: joined again.
    let list = common::unwrapped(&stdout(&output));
    let line = list.lines().find(|l| l.starts_with("wasm-thread")).unwrap();
    assert!(line.contains("unavailable") && line.contains("rustup target add wasm32-wasip1-threads"), "{line}");
    let out = dir.path().join("out");
    let output = taskmeter()
        .env("RUSTC", &rustc)
        .args([
            "run",
            "net",
            "--repeat",
            "1",
            "--receivers",
            "wasm-thread,thread",
            "--senders",
            "1",
            "--messages",
            "50",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "a skipped receiver is not a failure: {}", stderr(&output));
    assert!(common::unwrapped(&stderr(&output))
        .contains("skipping wasm-thread: the Rust target wasm32-wasip1-threads is not installed"));
    let record = net_json(&out);
    assert_eq!(record["skipped"][0]["receiver"], "wasm-thread");
    assert!(points(&record, "wasm-thread").is_empty());
    assert_eq!(points(&record, "thread").len(), 1);
    assert!(common::unwrapped(&stdout(&output)).contains("skipped: wasm-thread"));
}

#[test]
fn repetitions_give_each_point_an_interval() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = taskmeter()
        .args(["run", "net", "--receivers", "thread", "--senders", "1,2", "--messages", "200", "--repeat", "3", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let record = net_json(&out);
    assert_eq!(record["settings"]["repeat"], 3);
    let repetitions: Vec<u64> = points(&record, "thread").iter().map(|p| p["repetition"].as_u64().unwrap()).collect();
    assert_eq!(repetitions, [1, 1, 2, 2, 3, 3], "repetitions are the outer loop");
    let summaries = record["summaries"].as_array().unwrap();
    assert_eq!(summaries.len(), 2);
    for s in summaries {
        assert_eq!(s["repetitions"], 3);
        let t = &s["throughput"];
        assert!(t["value"].as_f64().unwrap() > 0.0 && t["half_width"].as_f64().unwrap() >= 0.0, "{s}");
        assert_eq!(t["degrees_of_freedom"], 2.0);
    }
    // The 1-sender ratio is 1 by definition, the reference: no range (no width, null degrees
    // of freedom). The 2-sender ratio has one, from both means' repetitions.
    let reference = &summaries[0]["ratio"];
    assert_eq!(reference["value"], 1.0);
    assert_eq!((reference["half_width"].as_f64(), reference["standard_error"].as_f64()), (Some(0.0), Some(0.0)));
    assert_eq!(reference["degrees_of_freedom"], serde_json::Value::Null);
    assert_eq!(summaries[1]["ratio"]["degrees_of_freedom"], 2.0);
    assert!(summaries[1]["ratio"]["half_width"].as_f64().unwrap() > 0.0, "{}", summaries[1]);
    assert_eq!(summaries[1]["ratio"]["log_scale"], true, "a ratio's range is on a log scale");
    let text = common::unwrapped(&stdout(&output));
    assert!(text.contains("95 % range for another invocation's mean, from 3 repetitions"), "{text}");
    // The reference is printed as such in both tables, never as a ratio with a range (another
    // sender count's ratio may well print as 1.00 with one).
    let references: Vec<&str> = text.lines().filter(|line| line.contains("1 (reference)")).collect();
    assert_eq!(references.len(), 2, "the 1-sender rows of both tables: {text}");
    assert!(references.iter().all(|line| !line.contains("1.00 (")), "{text}");
}
