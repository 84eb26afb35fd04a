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
const TASKSTATS_CMD_NEW: u8 = 2;
const TASKSTATS_CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
const TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK: u16 = 4;
const OFFSET_VERSION: usize = 0;
// Version 12 and later: the thread's process.
const OFFSET_AC_TGID: usize = 368;
const VERSION_WITH_TGID: u16 = 12;
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

    /// The version of the kernel's taskstats counters (read from this process's).
    fn version(&mut self) -> io::Result<u16> {
        let reply = self.ask(TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_TGID, &std::process::id().to_ne_bytes())?;
        attribute(reply, TASKSTATS_TYPE_AGGR_TGID)
            .and_then(|nested| attribute(nested, TASKSTATS_TYPE_STATS))
            .and_then(|stats| Some(u16::from_ne_bytes(stats.get(OFFSET_VERSION..OFFSET_VERSION + 2)?.try_into().ok()?)))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a taskstats reply without its counters"))
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

    /// Sends one request with one attribute; returns the reply's attributes (none for an
    /// acknowledgement).
    fn ask(&mut self, command: u8, attribute_type: u16, value: &[u8]) -> io::Result<&[u8]> {
        self.send(command, attribute_type, value, libc::NLM_F_REQUEST as u16)?;
        self.receive()
    }

    fn send(&mut self, command: u8, attribute_type: u16, value: &[u8], flags: u16) -> io::Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        let attribute_len = 4 + value.len();
        let len = NLMSG_HEADER + GENL_HEADER + attribute_len.next_multiple_of(4);
        let mut request = Vec::with_capacity(len);
        request.extend((len as u32).to_ne_bytes());
        request.extend(self.family.to_ne_bytes());
        request.extend(flags.to_ne_bytes());
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
        Ok(())
    }

    /// The reply to the last request.
    fn receive(&mut self) -> io::Result<&[u8]> {
        let fd = self.socket.as_raw_fd();
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
                if code == 0 {
                    return Ok(&[]); // an acknowledgement
                }
                return Err(io::Error::from_raw_os_error(-code));
            }
            let len = (u32::from_ne_bytes(reply[..4].try_into().expect("4 bytes")) as usize).min(got);
            return reply
                .get(NLMSG_HEADER + GENL_HEADER..len)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a netlink reply shorter than its headers"));
        }
    }
}

/// The threads of a process that end while it is watched, counted from the kernel's taskstats
/// notices (each thread that exits on a watched CPU sends its listeners its final counters).
/// For a worker read as a whole, this replaces listing `/proc/PID/task` at each reading to see
/// which threads went: at 10,000 threads two listings cost 20-40 ms of taskmeter's CPU, a tenth
/// of all it did in a 10,000-unit run (issue 28). For any worker, it also sees the threads that
/// were born and ended between the readings, which two listings miss. Notices come from every
/// process on the machine; those of others are skipped. A watch has a socket of its own: on one
/// that also asks questions, a notice would be taken for a stray reply and skipped.
pub struct Exits {
    stats: Taskstats,
    cpus: String,
    tgid: u32,
}

/// Room for the notices: about 1.3 KiB each, so about 12,000 exits between two readings before
/// the kernel drops notices (which is then said, not hidden).
const EXITS_BUFFER_BYTES: libc::c_int = 16 << 20;

impl Exits {
    /// Starts counting the exits of process `tgid`'s threads, on every CPU. Fails where
    /// taskstats cannot be asked, or where its counters do not name a thread's process (before
    /// taskstats version 12; the caller then lists the threads as before).
    pub fn watch(tgid: u32) -> io::Result<Exits> {
        let mut stats = Taskstats::open()?;
        let version = stats.version()?;
        if version < VERSION_WITH_TGID {
            return Err(io::Error::other(format!(
                "taskstats version {version} does not name a thread's process (version {VERSION_WITH_TGID} does)"
            )));
        }
        let fd = stats.socket.as_raw_fd();
        let size = &EXITS_BUFFER_BYTES as *const libc::c_int;
        let size_len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid option value of its own size. FORCE passes the system's limit (it needs
        // CAP_NET_ADMIN, as taskstats does); where refused, the limit is asked for.
        unsafe {
            if libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, size.cast(), size_len) != 0 {
                libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, size.cast(), size_len);
            }
        }
        let cpus = std::fs::read_to_string("/sys/devices/system/cpu/possible")?.trim().to_string();
        let mut mask = cpus.clone().into_bytes();
        mask.push(0);
        stats.send(
            TASKSTATS_CMD_GET,
            TASKSTATS_CMD_ATTR_REGISTER_CPUMASK,
            &mask,
            (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
        )?;
        stats.receive()?;
        Ok(Exits { stats, cpus, tgid })
    }

    /// The process's threads that ended since the watch began (or since the last call), and
    /// whether notices were lost (the kernel dropped some, of any process, for want of room, or
    /// the socket failed): the count is then a lower bound.
    pub fn ended(&mut self) -> (u32, bool) {
        let (mut ended, mut dropped) = (0, false);
        let fd = self.stats.socket.as_raw_fd();
        let buffer = &mut self.stats.reply;
        loop {
            // SAFETY: the buffer is valid for its length.
            let got = unsafe { libc::recv(fd, buffer.as_mut_ptr().cast(), buffer.len(), libc::MSG_DONTWAIT) };
            if got < 0 {
                match io::Error::last_os_error() {
                    e if e.raw_os_error() == Some(libc::ENOBUFS) => dropped = true,
                    e if e.kind() == io::ErrorKind::WouldBlock => return (ended, dropped),
                    e if e.kind() == io::ErrorKind::Interrupted => {}
                    _ => return (ended, true),
                }
                continue;
            }
            let mut messages = &buffer[..got as usize];
            while messages.len() >= NLMSG_HEADER + GENL_HEADER {
                let len = u32::from_ne_bytes(messages[..4].try_into().expect("4 bytes")) as usize;
                let Some(message) = messages.get(..len).filter(|_| len >= NLMSG_HEADER + GENL_HEADER) else { break };
                let kind = u16::from_ne_bytes([message[4], message[5]]);
                if kind == self.stats.family
                    && message[NLMSG_HEADER] == TASKSTATS_CMD_NEW
                    && exit_of(&message[NLMSG_HEADER + GENL_HEADER..]) == Some(self.tgid)
                {
                    ended += 1;
                }
                messages = messages.get(len.next_multiple_of(4)..).unwrap_or_default();
            }
        }
    }
}

impl Drop for Exits {
    fn drop(&mut self) {
        let mut mask = std::mem::take(&mut self.cpus).into_bytes();
        mask.push(0);
        // Closing the socket would also end the watch, at the kernel's next notice.
        let _ = self.stats.send(
            TASKSTATS_CMD_GET,
            TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK,
            &mask,
            libc::NLM_F_REQUEST as u16,
        );
    }
}

/// The process of the thread whose exit notice has these attributes.
fn exit_of(attributes: &[u8]) -> Option<u32> {
    let stats = attribute(attribute(attributes, TASKSTATS_TYPE_AGGR_PID)?, TASKSTATS_TYPE_STATS)?;
    Some(u32::from_ne_bytes(stats.get(OFFSET_AC_TGID..OFFSET_AC_TGID + 4)?.try_into().ok()?))
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

    /// Every thread that ends while watched is counted, for its own process only: three threads
    /// of this one (at least: tests run beside each other), a child's once it is killed (not
    /// before, nor another child's), each once.
    #[test]
    fn ended_threads_are_counted_for_their_process() {
        let watch = |pid: u32| match Exits::watch(pid) {
            Ok(exits) => Some(exits),
            // SAFETY: geteuid has no preconditions.
            Err(e) if unsafe { libc::geteuid() } == 0 && e.raw_os_error() != Some(libc::ENOENT) => {
                panic!("taskstats exit notices refused root: {e}")
            }
            Err(e) => {
                eprintln!("taskstats exit notices unavailable here ({e})");
                None
            }
        };
        let Some(mut mine) = watch(std::process::id()) else { return };
        for _ in 0..3 {
            std::thread::spawn(|| {}).join().unwrap();
        }
        let (ended, dropped) = mine.ended();
        assert!(ended >= 3 && !dropped, "{ended} {dropped}");
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut childs = watch(child.id()).unwrap();
        std::process::Command::new("true").status().unwrap();
        assert_eq!(childs.ended(), (0, false), "still running; another child ended");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(childs.ended(), (1, false));
        assert_eq!(childs.ended(), (0, false), "counted once");
    }

    /// A process's sums include a thread that ended, for its time on a CPU and waiting.
    #[test]
    fn a_process_sums_its_threads_and_keeps_the_ended_ones_time() {
        let Ok(mut stats) = Taskstats::open() else { return };
        let pid = std::process::id();
        let before = stats.process(pid).expect("this process");
        // 30 ms of the thread's own CPU time, however long a loaded machine takes to give it.
        let thread_cpu_ns = || {
            let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: writes one timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
            now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
        };
        std::thread::spawn(move || {
            while thread_cpu_ns() < 30_000_000 {
                std::hint::black_box(0);
            }
        })
        .join()
        .unwrap();
        let after = stats.process(pid).expect("this process");
        assert!(after.on_cpu_ns >= before.on_cpu_ns + 30_000_000, "{before:?} {after:?}");
        assert!(after.wait_ns >= before.wait_ns);
    }
}
