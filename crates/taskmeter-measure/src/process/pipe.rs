//! The read ends of a child's stdout and stderr. A reader never blocks for good: once the child
//! has exited, the supervisor sees (with poll's POLLHUP) whether anything else still holds the
//! write end (a helper process the child started), kills the child's process group, and, if a
//! writer escaped the group, abandons the pipe: the reader then sees end of file. A reader
//! waits without a timeout (an eventfd wakes it when the pipe is abandoned): a reader that woke
//! every 100 ms to look cost a default run about 20 wake-ups a pipe a row.

use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the reader and the supervisor share: the descriptor (closed when both are done with
/// it, so the supervisor can poll it safely) and whether to give up on it.
pub struct PipeState {
    fd: OwnedFd,
    abandoned: AtomicBool,
    /// Written when abandoned, so a reader waiting in poll wakes (None: no eventfd could be
    /// made, and the reader looks every 100 ms instead).
    wake: Option<OwnedFd>,
}

impl PipeState {
    /// Whether every writer has closed its end (data may still be buffered).
    pub fn writers_gone(&self) -> bool {
        let mut poll = libc::pollfd { fd: self.fd.as_raw_fd(), events: 0, revents: 0 };
        // SAFETY: one valid pollfd; the descriptor is owned by self and open.
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        ready < 0 || poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
    }

    /// Waits up to `timeout_ms` for something to read (or the end, or an abandon): false when
    /// the time passed first.
    pub fn readable_within(&self, timeout_ms: i32) -> bool {
        let wake = self.wake.as_ref().map_or(-1, |w| w.as_raw_fd());
        let mut polls = [
            libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: two valid pollfds (a negative fd is ignored).
        let ready = unsafe { libc::poll(polls.as_mut_ptr(), 2, timeout_ms) };
        ready != 0 || self.abandoned.load(Ordering::SeqCst)
    }

    /// Makes the reader see end of file at its next read, waking it if it waits.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::SeqCst);
        if let Some(wake) = &self.wake {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a local buffer to an eventfd we own.
            unsafe { libc::write(wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }
}

/// A pipe's read end that gives up when abandoned.
pub struct Pipe {
    state: Arc<PipeState>,
}

/// What a worker's stdout may hold (Linux's default is 64 KiB, and pipe-max-size's default 1
/// MiB lets any user ask for this): a writer's flush of many units' samples then passes in one
/// or two reads rather than dozens of wake-ups on both sides.
pub const WORKER_PIPE_BYTES: i32 = 1 << 20;

impl Pipe {
    /// What the reader shares with the supervisor, to wait on the pipe with a timeout.
    pub fn state(&self) -> Arc<PipeState> {
        self.state.clone()
    }

    /// Asks the kernel for a buffer of `bytes`; where it refuses (a lower pipe-max-size, the
    /// user's pipe quota reached), the pipe keeps its size, which only costs wake-ups.
    pub fn enlarge(&self, bytes: i32) {
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(self.state.fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) };
    }

    /// Takes over a child's stdout or stderr; the state goes to the supervisor.
    pub fn new(end: impl Into<OwnedFd>) -> (Pipe, Arc<PipeState>) {
        let fd: OwnedFd = end.into();
        // Non-blocking, so that a read that would wait can look at `abandoned` first (a poll
        // with a timeout does the waiting).
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        // SAFETY: eventfd makes a new descriptor, which the OwnedFd then owns.
        let wake = match unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) } {
            -1 => None,
            raw => Some(unsafe { OwnedFd::from_raw_fd(raw) }),
        };
        let state = Arc::new(PipeState { fd, abandoned: AtomicBool::new(false), wake });
        (Pipe { state: state.clone() }, state)
    }
}

impl Read for Pipe {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let fd = self.state.fd.as_raw_fd();
        loop {
            if self.state.abandoned.load(Ordering::SeqCst) {
                return Ok(0);
            }
            // SAFETY: reads into the caller's buffer, within its length.
            let n = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let error = std::io::Error::last_os_error();
            match error.kind() {
                ErrorKind::Interrupted => continue,
                ErrorKind::WouldBlock => {
                    let wake = self.state.wake.as_ref().map_or(-1, |w| w.as_raw_fd());
                    let mut polls = [
                        libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
                        libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 },
                    ];
                    // Without an eventfd, 100 ms bounds how long an abandon goes unseen.
                    let (count, timeout) = if wake < 0 { (1, 100) } else { (2, -1) };
                    // SAFETY: `count` valid pollfds.
                    unsafe { libc::poll(polls.as_mut_ptr(), count, timeout) };
                }
                _ => return Err(error),
            }
        }
    }
}

/// Reads a pipe to its end, keeping at most the last `keep` bytes (run on a thread of its own,
/// so that a full pipe never blocks the child).
pub fn collect(pipe: Option<Pipe>, keep: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else { return kept };
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(n) = pipe.read(&mut buffer) {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buffer[..n]);
        if kept.len() > keep.saturating_mul(2) {
            kept.drain(..kept.len() - keep);
        }
    }
    if kept.len() > keep {
        kept.drain(..kept.len() - keep);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abandoned_pipe_wakes_its_waiting_reader_with_end_of_file() {
        let mut ends = [0; 2];
        // SAFETY: pipe fills two descriptors, each then owned once.
        assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0);
        let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
        let (mut pipe, state) = Pipe::new(read_end);
        // SAFETY: writes 3 bytes from a literal to the write end we own.
        unsafe { libc::write(write_end.as_raw_fd(), b"abc".as_ptr().cast(), 3) };
        let (done, finished) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 8];
            let first = pipe.read(&mut buffer).unwrap();
            // The write end stays open: this read waits until the pipe is abandoned.
            let second = pipe.read(&mut buffer).unwrap();
            done.send((first, second)).unwrap();
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!state.writers_gone(), "a writer still holds the pipe");
        state.abandon();
        // A bound no load reaches: without the wake-up the reader would wait for good.
        let got = finished.recv_timeout(std::time::Duration::from_secs(30)).expect("the reader woke");
        assert_eq!(got, (3, 0));
        reader.join().unwrap();
        drop(write_end);
    }
}
