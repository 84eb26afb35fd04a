//! The machine's room for a worker's units, measured right before each worker starts and passed
//! in its plan (protocol: "Starting units"). A runtime that cannot survive a refused thread or a
//! failed allocation (Go, HotSpot, V8, Rust's std) must stop its start below the kernel's limits;
//! they are read here, once, so that every driver meets the same figures, worded the same way,
//! and keeps only what it alone knows: its own memory maps and its runtime's own threads.

use std::path::{Path, PathBuf};
use taskmeter_protocol::Room;

/// Once the pid counter has wrapped, pids below 300 are never handed out again.
const RESERVED_PIDS: i64 = 300;
/// The room is shared with every other process: 1/32 of it is left to them.
const OTHERS_SHARE: i64 = 32;
/// A cgroup v1 memory limit this large is "unlimited" (the kernel writes about 2^63).
const NO_MEMORY_LIMIT: i64 = 1 << 53;

/// The room right now: the threads this user may still create, the memory available, and
/// `vm.max_map_count`, each with the limit that binds.
pub fn now() -> Room {
    let tasks = read("/proc/loadavg").as_deref().and_then(threads_on_machine);
    let mut limits =
        kernel_limits(tasks, read_int("/proc/sys/kernel/threads-max"), read_int("/proc/sys/kernel/pid_max"));
    // SAFETY: getuid cannot fail; getrlimit fills the struct it is given.
    let uid = unsafe { libc::getuid() };
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    let nproc = (unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut rl) } == 0 && rl.rlim_cur != libc::RLIM_INFINITY)
        .then_some(rl.rlim_cur);
    // Counting the user's threads reads every process's status: only when the limit applies.
    if uid != 0 && nproc.is_some() {
        limits.extend(nproc_limit(uid, nproc, threads_of_user(uid)));
    }
    let own_cgroups = read("/proc/self/cgroup").unwrap_or_default();
    for dir in cgroup_dirs(&own_cgroups, "pids") {
        limits.extend(pids_limit(&dir, read_int(dir.join("pids.max")), read_int(dir.join("pids.current"))));
    }
    let (threads, threads_why) = thread_room(&limits);

    let available_kb = read("/proc/meminfo").as_deref().and_then(|m| status_number(m, "MemAvailable:"));
    let mut cgroup_rooms = Vec::new();
    for dir in cgroup_dirs(&own_cgroups, "memory") {
        for (limit, used) in [("memory.max", "memory.current"), ("memory.limit_in_bytes", "memory.usage_in_bytes")] {
            if let (Some(l), Some(u)) = (read_int(dir.join(limit)), read_int(dir.join(used))) {
                cgroup_rooms.push((dir.join(limit), l, u));
            }
        }
    }
    let (memory_bytes, memory_why) = memory_room(available_kb, &cgroup_rooms);

    Room {
        threads,
        threads_why: Room::plain(&threads_why),
        memory_bytes,
        memory_why: Room::plain(&memory_why),
        max_map_count: read_int("/proc/sys/vm/max_map_count").and_then(|n| u64::try_from(n).ok()),
    }
}

/// One limit on the threads: how many are left under it, and what it is, with its figures.
#[derive(Debug, PartialEq)]
struct Limit {
    free: i64,
    what: String,
}

/// The threads on the machine: `/proc/loadavg`'s "running/total" ("0.52 0.58 0.59 2/345 6789").
fn threads_on_machine(loadavg: &str) -> Option<i64> {
    loadavg.split_whitespace().nth(3)?.split_once('/')?.1.parse().ok()
}

/// `kernel.threads-max` and `kernel.pid_max` both count every thread on the machine.
fn kernel_limits(tasks: Option<i64>, threads_max: Option<i64>, pid_max: Option<i64>) -> Vec<Limit> {
    let Some(tasks) = tasks else { return Vec::new() };
    let on_machine = format!("with {tasks} threads on the machine");
    let mut limits = Vec::new();
    if let Some(n) = threads_max {
        limits.push(Limit { free: n - tasks, what: format!("kernel.threads-max {n} {on_machine}") });
    }
    if let Some(n) = pid_max {
        limits.push(Limit {
            free: n - RESERVED_PIDS - tasks,
            what: format!("kernel.pid_max {n} (less {RESERVED_PIDS} reserved pids) {on_machine}"),
        });
    }
    limits
}

/// RLIMIT_NPROC counts every thread of the user (its real uid), and does not apply to root.
fn nproc_limit(uid: u32, nproc: Option<u64>, mine: i64) -> Option<Limit> {
    let n = i64::try_from(nproc?).ok().filter(|_| uid != 0)?;
    Some(Limit { free: n - mine, what: format!("RLIMIT_NPROC (ulimit -u) {n} with {mine} threads of uid {uid}") })
}

/// A pids cgroup's `pids.max` ("max" reads as no limit) less its `pids.current`.
fn pids_limit(dir: &Path, max: Option<i64>, current: Option<i64>) -> Option<Limit> {
    let (max, current) = (max?, current?);
    Some(Limit { free: max - current, what: format!("{}/pids.max {max} with {current} in use", dir.display()) })
}

/// The smallest room of all the limits, with 1/32 of it kept for other processes, and why.
fn thread_room(limits: &[Limit]) -> (Option<u64>, String) {
    let Some(first) = limits.iter().reduce(|a, b| if b.free < a.free { b } else { a }) else {
        return (None, "no limit on threads could be read".into());
    };
    let free = first.free.max(0);
    let others = free / OTHERS_SHARE;
    let why = format!("{}: {free} threads left, of which {others} (1/32) are kept for other processes", first.what);
    (Some((free - others) as u64), why)
}

/// The smaller of MemAvailable and the room under each memory cgroup limit (v2 `memory.max`
/// less `memory.current`, v1 `memory.limit_in_bytes` less `memory.usage_in_bytes`), and why.
fn memory_room(available_kb: Option<i64>, cgroups: &[(PathBuf, i64, i64)]) -> (Option<u64>, String) {
    let mut room = available_kb.map(|kb| (kb.max(0) << 10, format!("MemAvailable ({} MiB)", kb.max(0) >> 10)));
    for (file, limit, used) in cgroups.iter().filter(|(_, limit, _)| *limit < NO_MEMORY_LIMIT) {
        let free = (limit - used).max(0);
        if room.as_ref().is_none_or(|(bytes, _)| free < *bytes) {
            room = Some((free, format!("the room under {} ({} MiB)", file.display(), free >> 20)));
        }
    }
    match room {
        Some((bytes, why)) => (Some(bytes as u64), why),
        None => (None, "neither MemAvailable nor a memory cgroup limit could be read".into()),
    }
}

/// This process's cgroup directories for a controller, from its own up to the root (the limits
/// of ancestors apply too): cgroup v2 (`0::/path`, mounted at /sys/fs/cgroup or, in the hybrid
/// layout, /sys/fs/cgroup/unified) and the v1 hierarchy that holds the controller.
fn cgroup_dirs(self_cgroup: &str, controller: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for line in self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let roots: Vec<PathBuf> = if id == "0" && controllers.is_empty() {
            vec!["/sys/fs/cgroup".into(), "/sys/fs/cgroup/unified".into()]
        } else if controllers.split(',').any(|c| c == controller) {
            vec![Path::new("/sys/fs/cgroup").join(controllers)]
        } else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if relative.split('/').any(|part| part == "..") {
            continue; // outside this cgroup namespace's view: nothing to read
        }
        for root in roots {
            let mut dir = if relative.is_empty() { root.clone() } else { root.join(relative) };
            loop {
                dirs.push(dir.clone());
                if dir == root || !dir.pop() || !dir.starts_with(&root) {
                    break;
                }
            }
        }
    }
    dirs
}

/// The threads of the processes whose real uid is `uid`.
fn threads_of_user(uid: u32) -> i64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|status| status_number(status, "Uid:") == Some(uid as i64))
        .filter_map(|status| status_number(&status, "Threads:"))
        .sum()
}

/// The first number after `name` in a "Name: value ..." file (/proc/meminfo, /proc/PID/status).
fn status_number(text: &str, name: &str) -> Option<i64> {
    text.lines().find_map(|l| l.strip_prefix(name))?.split_whitespace().next()?.parse().ok()
}

/// A file holding one integer; "max", a missing or unreadable file are no figure.
fn read_int(path: impl AsRef<Path>) -> Option<i64> {
    read(path)?.trim().parse().ok()
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(free: i64, what: &str) -> Limit {
        Limit { free, what: what.into() }
    }

    #[test]
    fn the_threads_on_the_machine_come_from_loadavg() {
        assert_eq!(threads_on_machine("0.52 0.58 0.59 2/345 6789\n"), Some(345));
        assert_eq!(threads_on_machine("0.52 0.58 0.59"), None);
        assert_eq!(threads_on_machine("0.52 0.58 0.59 2-345 6789"), None);
    }

    #[test]
    fn kernel_limits_count_every_thread_and_reserve_pids() {
        let limits = kernel_limits(Some(345), Some(192_730), Some(32_768));
        assert_eq!(
            limits,
            [
                limit(192_385, "kernel.threads-max 192730 with 345 threads on the machine"),
                limit(32_123, "kernel.pid_max 32768 (less 300 reserved pids) with 345 threads on the machine"),
            ]
        );
        assert!(kernel_limits(None, Some(192_730), Some(32_768)).is_empty(), "no count, no room");
    }

    #[test]
    fn rlimit_nproc_binds_users_but_not_root() {
        assert_eq!(
            nproc_limit(1000, Some(60), 18),
            Some(limit(42, "RLIMIT_NPROC (ulimit -u) 60 with 18 threads of uid 1000"))
        );
        assert_eq!(nproc_limit(0, Some(60), 18), None);
        assert_eq!(nproc_limit(1000, None, 18), None, "unlimited");
    }

    #[test]
    fn the_smallest_room_binds_and_a_32nd_is_left_to_others() {
        let limits = [
            limit(192_385, "kernel.threads-max 192730 with 345 threads on the machine"),
            limit(32_123, "kernel.pid_max 32768 (less 300 reserved pids) with 345 threads on the machine"),
            limit(32_123, "a later limit as small does not replace the first"),
        ];
        let (room, why) = thread_room(&limits);
        assert_eq!(room, Some(32_123 - 1_003));
        assert_eq!(
            why,
            "kernel.pid_max 32768 (less 300 reserved pids) with 345 threads on the machine: 32123 threads left, \
             of which 1003 (1/32) are kept for other processes"
        );
        let (room, why) = thread_room(&[limit(-5, "/sys/fs/cgroup/pids/a/pids.max 10 with 15 in use")]);
        assert_eq!(room, Some(0), "a limit already passed leaves no room");
        assert!(why.ends_with(": 0 threads left, of which 0 (1/32) are kept for other processes"), "{why}");
        assert_eq!(thread_room(&[]), (None, "no limit on threads could be read".into()));
    }

    #[test]
    fn pids_cgroups_name_their_figures() {
        let dir = Path::new("/sys/fs/cgroup/user.slice");
        assert_eq!(
            pids_limit(dir, Some(1000), Some(12)),
            Some(limit(988, "/sys/fs/cgroup/user.slice/pids.max 1000 with 12 in use"))
        );
        assert_eq!(pids_limit(dir, "max".parse().ok(), Some(12)), None, "max is no limit");
    }

    #[test]
    fn cgroup_directories_go_up_to_the_root_in_v2_and_v1() {
        let v2 = cgroup_dirs("0::/user.slice/user-1000.slice/session-2.scope\n", "pids");
        let v2: Vec<&str> = v2.iter().map(|d| d.to_str().unwrap()).collect();
        assert_eq!(
            v2,
            [
                "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope",
                "/sys/fs/cgroup/user.slice/user-1000.slice",
                "/sys/fs/cgroup/user.slice",
                "/sys/fs/cgroup",
                "/sys/fs/cgroup/unified/user.slice/user-1000.slice/session-2.scope",
                "/sys/fs/cgroup/unified/user.slice/user-1000.slice",
                "/sys/fs/cgroup/unified/user.slice",
                "/sys/fs/cgroup/unified",
            ]
        );
        // A hybrid layout (this machine's kind): v1 controllers, some joined in one hierarchy.
        let hybrid = "9:name=systemd:/\n8:pids:/docker/abc\n4:memory:/process_api/c4d7\n2:cpu,cpuacct:/x\n0::/\n";
        let pids: Vec<PathBuf> =
            cgroup_dirs(hybrid, "pids").into_iter().filter(|d| d.starts_with("/sys/fs/cgroup/pids")).collect();
        assert_eq!(
            pids,
            [
                PathBuf::from("/sys/fs/cgroup/pids/docker/abc"),
                "/sys/fs/cgroup/pids/docker".into(),
                "/sys/fs/cgroup/pids".into()
            ]
        );
        assert!(cgroup_dirs(hybrid, "memory").contains(&PathBuf::from("/sys/fs/cgroup/memory/process_api/c4d7")));
        assert!(cgroup_dirs(hybrid, "cpuacct").contains(&PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/x")));
        assert_eq!(
            cgroup_dirs(hybrid, "cpuset"),
            [PathBuf::from("/sys/fs/cgroup"), "/sys/fs/cgroup/unified".into()],
            "only v2's"
        );
        assert!(cgroup_dirs("garbage\n", "pids").is_empty());
        assert!(cgroup_dirs("8:pids:/../../elsewhere\n", "pids").is_empty(), "outside the namespace's root");
    }

    #[test]
    fn memory_is_the_smaller_of_memavailable_and_each_cgroups_room() {
        let meminfo = "MemTotal:       32000000 kB\nMemFree:  1000 kB\nMemAvailable:   22883292 kB\n";
        let available = status_number(meminfo, "MemAvailable:");
        assert_eq!(available, Some(22_883_292));
        assert_eq!(memory_room(available, &[]), (Some(22_883_292 << 10), "MemAvailable (22346 MiB)".into()));
        let cgroups = [
            // cgroup v1's "unlimited" is no limit.
            (PathBuf::from("/sys/fs/cgroup/memory/memory.limit_in_bytes"), 9_223_372_036_854_771_712, 15_302_656),
            (PathBuf::from("/sys/fs/cgroup/a/memory.max"), 1 << 30, 1 << 28),
        ];
        assert_eq!(
            memory_room(available, &cgroups),
            (Some(3 << 28), "the room under /sys/fs/cgroup/a/memory.max (768 MiB)".into())
        );
        assert_eq!(memory_room(None, &cgroups[..1]).0, None);
        assert_eq!(memory_room(None, &[]).1, "neither MemAvailable nor a memory cgroup limit could be read");
    }

    #[test]
    fn status_files_give_the_users_threads() {
        let status = "Name:\tjava\nUid:\t1000\t1000\t1000\t1000\nThreads:\t23\n";
        assert_eq!((status_number(status, "Uid:"), status_number(status, "Threads:")), (Some(1000), Some(23)));
        assert_eq!(status_number(status, "Gid:"), None);
    }

    /// This machine's real /proc: every figure is there and positive, and every reason is one a
    /// plan carries. No number is checked: load moves them.
    #[test]
    fn this_machine_has_room_and_says_why() {
        let room = now();
        assert!(room.threads.is_some_and(|n| n > 0), "{room:?}");
        assert!(room.memory_bytes.is_some_and(|n| n > 0), "{room:?}");
        assert!(room.max_map_count.is_some_and(|n| n > 0), "{room:?}");
        for why in [&room.threads_why, &room.memory_why] {
            assert!(!why.is_empty() && *why == Room::plain(why), "{why}");
        }
        assert!(room.threads_why.contains("(1/32) are kept for other processes"), "{}", room.threads_why);
    }
}
