//! The secrets of `net serve` and `net send` stay secret: the session cookie reaches `net send`
//! from a file, the environment or standard input, never its command line (which `ps` shows to
//! every user), an error never repeats it, and every receiver admits a token only when all 32
//! of its bytes are right.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{stderr, stdout, taskmeter, Background, Finished};

/// A free port on loopback (bound, then released for `net serve` to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// What `ps` and `/proc` show of a running process's command line.
fn shown_command_line(pid: u32) -> (String, String) {
    let proc =
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).replace('\0', " ");
    let ps = std::process::Command::new("ps").args(["-o", "args=", "-p", &pid.to_string()]).output().unwrap();
    (proc, String::from_utf8_lossy(&ps.stdout).into_owned())
}

/// Watches a `net send` until it ends: every look at its command line while it runs must lack
/// `cookie`, and at least one look must have found it running. Returns its output.
fn watch(mut child: Child, cookie: &str) -> std::process::Output {
    let mut looks = 0;
    loop {
        let (proc, ps) = shown_command_line(child.id());
        assert!(!proc.contains(cookie) && !ps.contains(cookie), "the cookie is on the command line:\n{proc}\n{ps}");
        if child.try_wait().unwrap().is_some() {
            break;
        }
        // Exiting: its memory, the command line with it, is gone (read between the two looks,
        // `ps` shows its name in brackets).
        if proc.is_empty() || ps.contains("<defunct>") || ps.trim_start().starts_with('[') {
            continue;
        }
        assert!(proc.contains("net send"), "/proc/PID/cmdline of the running net send: {proc:?}");
        assert!(ps.contains("net send"), "ps -o args of the running net send: {ps:?}");
        looks += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(looks > 0, "net send ended before its command line could be read");
    child.wait_with_output().unwrap()
}

#[test]
fn the_cookie_never_reaches_net_sends_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // One point per way of giving the cookie; each runs long enough (a round trip a message)
    // for its command line to be read many times.
    let load = ["--messages", "20000", "--message-size", "1"];
    let listen = format!("127.0.0.1:{port}");
    let serve_args = ["net", "serve", "--receiver", "thread", "--listen", &listen, "--senders", "1,2,3"];
    let serve = Background::start(&[&serve_args[..], &load].concat(), &[]);
    let cookie = serve.cookie();
    assert!(cookie.len() == 32 && cookie.bytes().all(|b| b.is_ascii_hexdigit()), "{cookie}");
    let said = serve.stderr();
    assert!(said.contains("--cookie-file FILE") && said.contains("TASKMETER_NET_COOKIE"), "{said}");
    assert!(!said.contains(&format!("--cookie {cookie}")), "serve suggests no cookie on a command line:\n{said}");

    let file = dir.path().join("cookie");
    std::fs::write(&file, format!("{cookie}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let to = format!("127.0.0.1:{port}");
    let send = |senders: &str| {
        let mut command = taskmeter();
        command.args(["net", "send", "--to", &to, "--senders", senders]).args(load);
        command.env_remove("TASKMETER_NET_COOKIE").stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    };

    // From a file.
    let child = send("1").args(["--cookie-file", file.to_str().unwrap()]).spawn().unwrap();
    let from_file = watch(child, &cookie);
    // From the environment.
    let child = send("2").env("TASKMETER_NET_COOKIE", &cookie).spawn().unwrap();
    let from_environment = watch(child, &cookie);
    // From standard input: it waits for the line, so its command line is read before and after.
    let mut child = send("3").args(["--cookie", "-"]).stdin(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (proc, ps) = shown_command_line(child.id());
    assert!(proc.contains("--cookie -") && ps.contains("--cookie -"), "{proc:?} {ps:?}");
    child.stdin.take().unwrap().write_all(format!("{cookie}\n").as_bytes()).unwrap();
    let from_stdin = watch(child, &cookie);

    for (way, sent, senders) in
        [("file", from_file, 1), ("environment", from_environment, 2), ("standard input", from_stdin, 3)]
    {
        assert!(sent.status.success(), "{way}: {}{}", stdout(&sent), stderr(&sent));
        assert!(
            stdout(&sent).contains(&format!("{senders} senders: 20000 of 20000 messages acknowledged")),
            "{way}: {}",
            stdout(&sent)
        );
        assert!(!stdout(&sent).contains(&cookie) && !stderr(&sent).contains(&cookie), "{way}");
    }
    let Finished { status, stdout: out, stderr: err } = serve.finish();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("3 senders: 20000 messages in"), "{out}");
    assert_eq!(err.matches(&cookie).count(), 1, "the cookie is said once, on its own line:\n{err}");
}

#[test]
fn a_cookie_on_the_command_line_is_refused_and_no_error_repeats_a_cookie() {
    let cookie = "27ef1c0cf90f4c39f840ed14fd80c261";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cookie");
    let refused = |args: &[&str], env: Option<&str>| {
        let mut command = taskmeter();
        command.args(args).env_remove("TASKMETER_NET_COOKIE");
        if let Some(value) = env {
            command.env("TASKMETER_NET_COOKIE", value);
        }
        let output = command.output().unwrap();
        // One line, wrapped to the width of stderr: joined again.
        let err = common::unwrapped(&stderr(&output));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line:\n{err}");
        assert!(err.starts_with("taskmeter: "), "{err}");
        assert!(stdout(&output).is_empty(), "{args:?}");
        err
    };
    // A right cookie and a wrong one alike, with --dry-run too, and whatever else is given.
    for value in [cookie, "not-a-cookie-at-all"] {
        for extra in [&[][..], &["--dry-run"][..], &["--cookie-file", "/nonexistent"][..]] {
            let args = [&["net", "send", "--to", "127.0.0.1:1", "--cookie", value][..], extra].concat();
            let err = refused(&args, Some(cookie));
            assert!(!err.contains(value), "the value is never repeated: {err}");
            if extra.len() < 2 {
                for way in ["--cookie-file FILE", "TASKMETER_NET_COOKIE", "--cookie -"] {
                    assert!(err.contains(way), "{err}");
                }
            }
        }
    }
    // A cookie of the wrong shape, from each place: said what is wrong, never with the value.
    let almost = &cookie[..31];
    std::fs::write(&file, format!("{almost}\n")).unwrap();
    let err = refused(&["net", "send", "--to", "127.0.0.1:1", "--cookie-file", file.to_str().unwrap()], None);
    assert!(err.contains("it has 31 digits") && !err.contains(almost), "{err}");
    let err = refused(&["net", "send", "--to", "127.0.0.1:1"], Some(almost));
    assert!(err.contains("from TASKMETER_NET_COOKIE") && !err.contains(almost), "{err}");
    let mut child = taskmeter()
        .args(["net", "send", "--to", "127.0.0.1:1", "--cookie", "-"])
        .env_remove("TASKMETER_NET_COOKIE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{almost}x\n").as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("from standard input") && !stderr(&output).contains(almost),
        "{}",
        stderr(&output)
    );
    // None at all: the ways are named.
    let err = refused(&["net", "send", "--to", "127.0.0.1:1"], None);
    assert!(err.contains("--cookie-file FILE") && err.contains("TASKMETER_NET_COOKIE"), "{err}");
}

/// The token of sender `index` (receivers/README.md, "The handshake").
fn token(key: &[u8], nonce: &[u8], index: u32, connections: u32, message_size: u32) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(b"taskmeter net 2");
    mac.update(nonce);
    for n in [index, connections, message_size] {
        mac.update(&n.to_le_bytes());
    }
    mac.finalize().into_bytes().into()
}

/// How a test changes the right token.
type Change = fn(&mut [u8; 32]);

/// Connects (while `net serve` starts its receiver), reads the challenge, sends a hello whose
/// token is `change`d from the right one, and returns the verdict and the connection.
fn hello(port: u16, key: &[u8], change: impl Fn(&mut [u8; 32])) -> ([u8; 8], std::net::TcpStream) {
    let since = Instant::now();
    let mut stream = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => break stream,
            Err(e) => assert!(since.elapsed() < Duration::from_secs(60), "cannot connect: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut challenge = [0u8; 48];
    stream.read_exact(&mut challenge).unwrap();
    assert_eq!(&challenge[..8], b"TMNET2C\0");
    let mut right = token(key, &challenge[8..40], 0, 1, 1);
    change(&mut right);
    let mut hello = b"TMNET2H\0".to_vec();
    hello.extend_from_slice(&0u32.to_le_bytes());
    hello.extend_from_slice(&right);
    stream.write_all(&hello).unwrap();
    let mut verdict = [0u8; 8];
    stream.read_exact(&mut verdict).unwrap();
    (verdict, stream)
}

#[test]
fn every_receiver_admits_a_token_only_when_every_byte_is_right() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    let key = [0x5au8; 32];
    std::fs::write(&key_file, key).unwrap();
    for receiver in &common::receivers_where(|_| true) {
        let port = free_port();
        let serve = Background::start(
            &[
                "net",
                "serve",
                "--receiver",
                receiver,
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--senders",
                "1",
                "--messages",
                "1",
                "--message-size",
                "1",
                "--key-file",
                key_file.to_str().unwrap(),
            ],
            &[],
        );
        // The WebAssembly receivers are built on first use: minutes.
        serve.wait_for_stderr_up_to("waiting for 1 sender(s)", Duration::from_secs(30 * 60));
        let wrong: [(&str, Change); 3] = [
            ("the first byte differs", |t| t[0] ^= 0x01),
            ("the last byte differs", |t| t[31] ^= 0x80),
            ("every byte differs", |t| t.iter_mut().for_each(|b| *b = !*b)),
        ];
        for (how, change) in wrong {
            let (verdict, _) = hello(port, &key, change);
            assert_eq!(&verdict, b"TMNET2NO", "{receiver}: {how}");
        }
        // Each refusal is said as it happens: all three before the point starts and ends.
        let since = Instant::now();
        while serve.stderr().matches("wrong token for sender 0").count() < 3 {
            assert!(since.elapsed() < Duration::from_secs(60), "{receiver}: {}", serve.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
        let (verdict, mut stream) = hello(port, &key, |_| {});
        assert_eq!(&verdict, b"TMNET2OK", "{receiver}: the right token");
        stream.write_all(b"m").unwrap();
        let mut ack = [0u8; 1];
        stream.read_exact(&mut ack).unwrap();
        assert_eq!(&ack, b"m", "{receiver}");
        drop(stream);
        let Finished { status, stdout: out, stderr: err } = serve.finish();
        assert!(status.success(), "{receiver}: {out}{err}");
        assert!(out.contains("1 senders: 1 messages"), "{receiver}: {out}");
        assert_eq!(err.matches("wrong token for sender 0").count(), 3, "{receiver}: {err}");
    }
}
