//! `taskmeter-wasm GUEST.wasm [ARGS...]`: runs a WASI preview 1 guest with threads
//! (wasi-threads) on wasmtime, with the host's stdin, stdout and stderr, and the listening TCP
//! socket that taskmeter passes as fd 3 preopened as the guest's fd 3 (net protocol 2,
//! receivers/README.md). A failure of the host (fd 3 is not a listening TCP socket, the guest
//! does not load or traps) is the protocol's error line on stdout, the same on stderr, and exit
//! status 1; the guest's own exit status is passed on.

#[path = "../../json.rs"]
mod json;

use std::os::fd::FromRawFd;
use std::process::ExitCode;
use std::sync::Arc;
use wasmtime::{Config, Engine, Linker, Module, Store};
use wasmtime_wasi_threads::WasiThreadsCtx;

/// What the guest reports as its runtime; the version is pinned in Cargo.toml.
const WASMTIME: &str = "wasmtime 46.0.3 with wasi-threads";

/// The store's data; wasi-threads clones it for every thread the guest spawns.
#[derive(Clone)]
struct Host {
    wasi: wasi_common::WasiCtx,
    threads: Option<Arc<WasiThreadsCtx<Host>>>,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            // One line: net protocol 2's error line on stdout (taskmeter shows its message),
            // and the same for a person on stderr.
            let message = e.split_whitespace().collect::<Vec<_>>().join(" ");
            println!("{{\"type\":\"error\",\"message\":{}}}", json::quoted(&message));
            eprintln!("taskmeter-wasm: {message}");
            ExitCode::from(1)
        }
    }
}

/// fd 3 as a listening TCP socket, or why it is not one.
fn listener_on_fd3() -> Result<std::net::TcpListener, String> {
    let option = |name| {
        let mut value: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `length` bytes into `value`.
        match unsafe { libc::getsockopt(3, libc::SOL_SOCKET, name, (&raw mut value).cast(), &mut length) } {
            0 => Ok(value),
            _ => Err(std::io::Error::last_os_error().to_string()),
        }
    };
    let why = match (option(libc::SO_TYPE), option(libc::SO_ACCEPTCONN)) {
        (Ok(libc::SOCK_STREAM), Ok(1)) => {
            // SAFETY: fd 3 is ours by the protocol, and a listening stream socket.
            let listener = unsafe { std::net::TcpListener::from_raw_fd(3) };
            // A Unix-domain listener has no IP address.
            match listener.local_addr() {
                Ok(_) => return Ok(listener),
                Err(e) => format!("not an IP socket ({e})"),
            }
        }
        (Err(e), _) | (_, Err(e)) => e,
        _ => "a socket, but not a listening stream socket".into(),
    };
    Err(format!("fd 3 is not a listening TCP socket: {why}"))
}

/// Prefixes an error (wasmtime's or another) with what was being done.
fn context<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e:#}")
}

fn run() -> Result<ExitCode, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(guest) = args.first() else { return Err("usage: taskmeter-wasm GUEST.wasm [ARGS...]".into()) };
    // Before compiling the guest: a wrong fd 3 fails at once.
    let listener = listener_on_fd3()?;
    let mut config = Config::new();
    config.wasm_threads(true).shared_memory(true);
    let engine = Engine::new(&config).map_err(context("cannot start wasmtime"))?;
    let module = Module::from_file(&engine, guest).map_err(context(&format!("cannot load the guest {guest}")))?;

    let mut wasi = wasi_common::sync::WasiCtxBuilder::new();
    wasi.inherit_stdio().args(&args).map_err(context("guest arguments"))?;
    // WASI has no getpid: the guest's hello reports the host's pid and runtime from these.
    wasi.env("TASKMETER_HOST_PID", &std::process::id().to_string()).map_err(context("guest environment"))?;
    wasi.env("TASKMETER_HOST_RUNTIME", WASMTIME).map_err(context("guest environment"))?;
    wasi.preopened_socket(3, wasi_common::sync::TcpListener::from_std(listener))
        .map_err(context("cannot preopen fd 3"))?;

    let mut linker: Linker<Host> = Linker::new(&engine);
    wasi_common::sync::add_to_linker(&mut linker, |host: &mut Host| &mut host.wasi).map_err(context("WASI"))?;
    let mut store = Store::new(&engine, Host { wasi: wasi.build(), threads: None });
    wasmtime_wasi_threads::add_to_linker(&mut linker, &store, &module, |host: &mut Host| {
        host.threads.as_ref().unwrap()
    })
    .map_err(context("wasi-threads"))?;
    let threads =
        WasiThreadsCtx::new(module.clone(), Arc::new(linker.clone()), false).map_err(context("wasi-threads"))?;
    store.data_mut().threads = Some(Arc::new(threads));

    let instance = linker.instantiate(&mut store, &module).map_err(context("cannot instantiate the guest"))?;
    let start = instance.get_typed_func::<(), ()>(&mut store, "_start").map_err(context("the guest has no _start"))?;
    match start.call(&mut store, ()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => match e.downcast_ref::<wasi_common::I32Exit>() {
            Some(exit) => Ok(ExitCode::from(exit.0 as u8)),
            None => Err(format!("the guest trapped: {e:#}")),
        },
    }
}
