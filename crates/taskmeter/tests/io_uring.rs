//! Where io_uring is refused, as Docker's default seccomp profile refuses it: taskmeter run
//! under a seccomp filter that answers io_uring_setup with EPERM lists the io_uring runtimes
//! (monoio, glommio, compio) as unavailable with the reason and the line that grants it, and a
//! run skips them, measures the rest and exits 0.

mod common;
use common::*;
use std::os::unix::process::CommandExt;

/// Installs, in the calling process and all it starts, a seccomp filter refusing io_uring_setup
/// with EPERM and allowing every other call. io_uring_setup is 425 on every architecture.
fn refuse_io_uring() -> std::io::Result<()> {
    let code = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let filter = [
        // seccomp_data.nr, at offset 0
        code((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0, 0, 0),
        code((libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, 0, 1, libc::SYS_io_uring_setup as u32),
        code((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        code((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let program = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr().cast_mut() };
    // SAFETY: prctl and seccomp on the child between fork and exec, with a filter that lives
    // until the call returns (the kernel copies it).
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &program) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn under_filter(args: &[&str]) -> std::process::Output {
    let mut command = taskmeter();
    // SAFETY: the hook only makes two system calls.
    unsafe { command.pre_exec(refuse_io_uring) };
    command.args(args).output().expect("taskmeter runs under the filter")
}

const IO_URING: [&str; 6] = ["monoio", "monoio-1", "glommio", "glommio-1", "compio", "compio-1"];

#[test]
fn under_a_seccomp_filter_refusing_io_uring_its_runtimes_are_skipped_with_the_reason() {
    let output = under_filter(&["list", "--format", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let list: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let runtimes = list["runtimes"].as_array().unwrap();
    let row = |id: &str| runtimes.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no runtime {id}"));
    for id in IO_URING {
        assert_eq!(row(id)["available"], false, "{id}: {}", row(id));
        let reason = row(id)["reason"].as_str().unwrap();
        assert!(reason.contains("EPERM by a seccomp filter (this process runs under one"), "{id}: {reason}");
        assert!(reason.contains("--security-opt seccomp=unconfined"), "{id}: {reason}");
    }
    assert_eq!(row("thread")["available"], true);

    let text = unwrapped(&stdout(&under_filter(&["list"])));
    assert!(text.contains("io_uring_setup is refused with EPERM"), "{text}");

    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("run");
    let output = under_filter(&["run", "--runtimes", "monoio,thread", "--quick", "-o", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let record = run_json(&out);
    let rows = record["rows"].as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["runtime"] == id).unwrap_or_else(|| panic!("no row {id}"));
    assert_eq!(row("monoio")["status"], "skipped", "{}", row("monoio"));
    assert!(row("monoio")["reason"].as_str().unwrap().contains("seccomp=unconfined"), "{}", row("monoio"));
    assert_eq!(row("thread")["status"], "ok", "{}", row("thread"));
    let said = unwrapped(&format!("{}{}", stdout(&output), stderr(&output)));
    assert!(said.contains("io_uring_setup is refused with EPERM"), "{said}");
}
