//! A thread's scheduler counters from the kernel's taskstats interface (generic netlink,
//! `Documentation/accounting/taskstats.rst`): the numbers of `/proc/PID/task/TID/schedstat` and
//! the context switches of `.../sched`, in one binary reply rather than two formatted files.
//! Reading 10,000 threads twice cost taskmeter about 0.5 s of CPU through /proc (issue 28).
//! The query needs CAP_NET_ADMIN and `CONFIG_TASKSTATS`; without them [`Taskstats::open`] fails
//! and the counters are read from /proc as before.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What the kernel counted for one thread since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCounts {
    /// Time on a CPU, ns (`se.sum_exec_runtime`: schedstat's first field).
    pub on_cpu_ns: u64,
    /// Time runnable but waiting for a CPU, ns (`sched_info.run_delay`: schedstat's second).
    pub wait_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

/// An open taskstats socket. One query at a time.
pub struct Taskstats {
    socket: OwnedFd,
    family: u16,
    sequence: u32,
    /// The last reply, kept for the next (one allocation per socket, not per query).
    reply: Vec<u8>,
}

// From <linux/taskstats.h>; the struct only grows at its end, so these offsets hold for every
// version that has the switches (2 and later).
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_ATTR_PID: u16 = 1;
const TASKSTATS_CMD_ATTR_TGID: u16 = 2;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;
const TASKSTATS_TYPE_AGGR_TGID: u16 = 5;
const OFFSET_CPU_DELAY_TOTAL: usize = 24;
const OFFSET_CPU_RUN_VIRTUAL_TOTAL: usize = 72;
const OFFSET_NVCSW: usize = 272;
const OFFSET_NIVCSW: usize = 280;

const NLMSG_HEADER: usize = 16;
const GENL_HEADER: usize = 4;

impl Taskstats {
    /// Opens a socket and finds the taskstats family.
    pub fn open() -> io::Result<Taskstats> {
        // SAFETY: plain system calls on a socket this function owns.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_GENERIC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by socket(2) and nothing else owns it.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // The kernel answers at once; the timeout only guards against a reply that never comes.
        let timeout = libc::timeval { tv_sec: 1, tv_usec: 0 };
        // SAFETY: a valid option value of its own size.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        let mut stats = Taskstats { socket, family: libc::GENL_ID_CTRL as u16, sequence: 0, reply: vec![0; 4096] };
        let reply = stats.ask(libc::CTRL_CMD_GETFAMILY as u8, libc::CTRL_ATTR_FAMILY_NAME as u16, b"TASKSTATS\0")?;
        let id = attribute(reply, libc::CTRL_ATTR_FAMILY_ID as u16)
            .and_then(|v| Some(u16::from_ne_bytes(v.get(..2)?.try_into().ok()?)))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no taskstats family id"))?;
        stats.family = id;
        Ok(stats)
    }

    /// The counters of thread `tid` (any thread of any process).
    pub fn thread(&mut self, tid: u32) -> io::Result<ThreadCounts> {
        self.counts(TASKSTATS_CMD_ATTR_PID, TASKSTATS_TYPE_AGGR_PID, tid)
    }

    /// The sums over every thread of process `pid`, in one query: time on a CPU and waiting for
    /// one include the threads that ended (the kernel adds them up as they exit), the switches
    /// only the threads alive now.
    pub fn process(&mut self, pid: u32) -> io::Result<ThreadCounts> {
        self.counts(TASKSTATS_CMD_ATTR_TGID, TASKSTATS_TYPE_AGGR_TGID, pid)
    }

    fn counts(&mut self, ask_by: u16, answer: u16, id: u32) -> io::Result<ThreadCounts> {
        let reply = self.ask(TASKSTATS_CMD_GET, ask_by, &id.to_ne_bytes())?;
        let stats = attribute(reply, answer)
            .and_then(|nested| attribute(nested, TASKSTATS_TYPE_STATS))
            .filter(|s| s.len() >= OFFSET_NIVCSW + 8)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a taskstats reply without its counters"))?;
        let at = |offset: usize| u64::from_ne_bytes(stats[offset..offset + 8].try_into().expect("8 bytes"));
        Ok(ThreadCounts {
            on_cpu_ns: at(OFFSET_CPU_RUN_VIRTUAL_TOTAL),
            wait_ns: at(OFFSET_CPU_DELAY_TOTAL),
            voluntary: at(OFFSET_NVCSW),
            involuntary: at(OFFSET_NIVCSW),
        })
    }

    /// Sends one request with one attribute; returns the reply's attributes.
    fn ask(&mut self, command: u8, attribute_type: u16, value: &[u8]) -> io::Result<&[u8]> {
        self.sequence = self.sequence.wrapping_add(1);
        let attribute_len = 4 + value.len();
        let len = NLMSG_HEADER + GENL_HEADER + attribute_len.next_multiple_of(4);
        let mut request = Vec::with_capacity(len);
        request.extend((len as u32).to_ne_bytes());
        request.extend(self.family.to_ne_bytes());
        request.extend((libc::NLM_F_REQUEST as u16).to_ne_bytes());
        request.extend(self.sequence.to_ne_bytes());
        request.extend(0u32.to_ne_bytes()); // port: the kernel's
        request.extend([command, 1, 0, 0]); // genlmsghdr: command, version 1
        request.extend((attribute_len as u16).to_ne_bytes());
        request.extend(attribute_type.to_ne_bytes());
        request.extend(value);
        request.resize(len, 0);
        let fd = self.socket.as_raw_fd();
        // SAFETY: the buffer is valid for its length.
        if unsafe { libc::send(fd, request.as_ptr().cast(), request.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let reply = &mut self.reply;
        loop {
            // SAFETY: the buffer is valid for its length.
            let got = unsafe { libc::recv(fd, reply.as_mut_ptr().cast(), reply.len(), 0) };
            if got < 0 {
                return Err(io::Error::last_os_error());
            }
            let got = got as usize;
            if got < NLMSG_HEADER {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a short netlink reply"));
            }
            let kind = u16::from_ne_bytes([reply[4], reply[5]]);
            let sequence = u32::from_ne_bytes(reply[8..12].try_into().expect("4 bytes"));
            if sequence != self.sequence {
                continue; // an answer to an earlier request that timed out
            }
            if kind == libc::NLMSG_ERROR as u16 {
                let code = i32::from_ne_bytes(reply[16..20].try_into().expect("4 bytes"));
                return Err(io::Error::from_raw_os_error(-code));
            }
            let len = (u32::from_ne_bytes(reply[..4].try_into().expect("4 bytes")) as usize).min(got);
            return reply
                .get(NLMSG_HEADER + GENL_HEADER..len)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a netlink reply shorter than its headers"));
        }
    }
}

/// The value of the first netlink attribute of `kind` in `attributes` (nested or not).
fn attribute(mut attributes: &[u8], kind: u16) -> Option<&[u8]> {
    while attributes.len() >= 4 {
        let len = u16::from_ne_bytes([attributes[0], attributes[1]]) as usize;
        let this = u16::from_ne_bytes([attributes[2], attributes[3]]) & 0x3fff; // without the nested/byte-order flags
        if len < 4 || len > attributes.len() {
            return None;
        }
        if this == kind {
            return Some(&attributes[4..len]);
        }
        attributes = attributes.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_found_nested_and_padded() {
        // [len 5, type 9, "x" + 3 pad] [len 16, type 4 | nested, [len 8, type 3, 1 2 3 4]] ...
        let mut buf = vec![5, 0, 9, 0, b'x', 0, 0, 0];
        buf.extend([16, 0, 4, 0x80, 8, 0, 3, 0, 1, 2, 3, 4, 0, 0, 0, 0]);
        assert_eq!(attribute(&buf, 9), Some(&b"x"[..]));
        let nested = attribute(&buf, 4).expect("the nested attribute");
        assert_eq!(attribute(nested, 3), Some(&[1, 2, 3, 4][..]));
        assert_eq!(attribute(&buf, 7), None);
        assert_eq!(attribute(&[200, 0, 1, 0], 1), None, "a length past the end is refused");
    }

    /// The counters of this thread, if the kernel lets this process ask (root, CONFIG_TASKSTATS):
    /// the same as its schedstat file, read just before and just after.
    #[test]
    fn a_thread_reads_as_its_schedstat() {
        let mut stats = match Taskstats::open() {
            Ok(stats) => stats,
            // Root on a kernel with taskstats (this project's CI) must get here.
            // SAFETY: geteuid has no preconditions.
            Err(e) if unsafe { libc::geteuid() } == 0 && e.raw_os_error() != Some(libc::ENOENT) => {
                panic!("taskstats refused root: {e}")
            }
            Err(e) => {
                eprintln!("taskstats unavailable here ({e}): the counters come from /proc, tested elsewhere");
                return;
            }
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let schedstat = || -> Vec<u64> {
            let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
            text.split_whitespace().map(|v| v.parse().unwrap()).collect()
        };
        let before = schedstat();
        let counts = stats.thread(tid).expect("this thread");
        let after = schedstat();
        assert!((before[0]..=after[0]).contains(&counts.on_cpu_ns), "{before:?} {counts:?} {after:?}");
        assert!((before[1]..=after[1]).contains(&counts.wait_ns), "{before:?} {counts:?} {after:?}");
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        let field =
            |key: &str| -> u64 { status.lines().find_map(|l| l.strip_prefix(key)).unwrap().trim().parse().unwrap() };
        assert!(counts.voluntary <= field("voluntary_ctxt_switches:"));
        assert!(counts.involuntary <= field("nonvoluntary_ctxt_switches:"));
        assert_eq!(stats.thread(u32::MAX >> 2).map_err(|e| e.raw_os_error()), Err(Some(libc::ESRCH)));
    }

    /// A process's sums include a thread that ended, for its time on a CPU and waiting.
    #[test]
    fn a_process_sums_its_threads_and_keeps_the_ended_ones_time() {
        let Ok(mut stats) = Taskstats::open() else { return };
        let pid = std::process::id();
        let before = stats.process(pid).expect("this process");
        std::thread::spawn(|| {
            let started = std::time::Instant::now();
            while started.elapsed() < std::time::Duration::from_millis(30) {
                std::hint::black_box(0);
            }
        })
        .join()
        .unwrap();
        let after = stats.process(pid).expect("this process");
        assert!(after.on_cpu_ns >= before.on_cpu_ns + 20_000_000, "{before:?} {after:?}");
        assert!(after.wait_ns >= before.wait_ns);
    }
}
