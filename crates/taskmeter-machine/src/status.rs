//! A process's `/proc/PID/status` (proc(5)), held open and read again in place.
//!
//! taskmeter follows each worker's peak memory (`VmHWM`) every 250 ms while it runs. Opening the
//! file by its path each time, reading it into a new string and dropping it took 7.6 µs a
//! reading; one `pread` into the same buffer takes 3.4 (issue 28). An open file also stays the
//! same process's: a path names whichever process has the pid once the first has ended and its
//! pid is reused.

use std::fs::File;
use std::os::unix::fs::FileExt;

pub struct Status {
    file: File,
    /// The last reading's bytes (the file is about 1.5 KiB; the buffer grows if it is more).
    text: Vec<u8>,
}

impl Status {
    /// `/proc/{pid}/status`: `pid` a number, or `self`. None if there is no such process.
    pub fn open(pid: &str) -> Option<Status> {
        let file = File::open(format!("/proc/{pid}/status")).ok()?;
        Some(Status { file, text: vec![0; 4096] })
    }

    /// The number after `key` (`VmHWM:` in kB, `Threads:`) as the file says it now; None when the
    /// field is absent (a process that has exited has no `Vm` fields) or the process is gone.
    pub fn field(&mut self, key: &str) -> Option<u64> {
        // A seq_file read from offset 0 is written afresh.
        let mut len = 0;
        loop {
            if len == self.text.len() {
                self.text.resize(2 * len, 0);
            }
            match self.file.read_at(&mut self.text[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(_) => return None,
            }
        }
        field_of(std::str::from_utf8(&self.text[..len]).ok()?, key)
    }
}

/// The first number after `key` on the line that starts with it (`VmHWM:\t  1234 kB` gives 1234).
fn field_of(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_the_number_after_its_key() {
        let text = "Name:\tsleep\nThreads:\t7\nVmHWM:\t    1234 kB\nVmRSS:\t  99 kB\n";
        assert_eq!(field_of(text, "Threads:"), Some(7));
        assert_eq!(field_of(text, "VmHWM:"), Some(1234));
        assert_eq!(field_of(text, "VmRSS:"), Some(99));
        assert_eq!(field_of(text, "VmPeak:"), None, "absent");
        assert_eq!(field_of("Threads:\n", "Threads:"), None, "no number");
    }

    #[test]
    fn reads_again_in_place() {
        let mut status = Status::open("self").expect("this process");
        for _ in 0..3 {
            assert!(status.field("Threads:").expect("a thread count") >= 1);
            assert!(status.field("VmRSS:").expect("a resident size") > 0);
        }
    }

    #[test]
    fn a_process_gone_reads_as_none() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut status = Status::open(&child.id().to_string()).expect("the child");
        assert_eq!(status.field("Threads:"), Some(1), "sleep runs on one thread");
        assert!(status.field("VmHWM:").is_some_and(|kb| kb > 0));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(status.field("VmHWM:"), None, "reaped: its file reads as nothing");
        assert!(Status::open(&i32::MAX.to_string()).is_none(), "no such process");
    }
}
