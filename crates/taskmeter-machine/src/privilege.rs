//! What this host grants taskmeter, probed once per process by trying each thing on a thread
//! of its own (which then ends): real-time scheduling and up to which priority, a negative
//! nice, holding `/dev/cpu_dma_latency`, locking memory, the kernel's taskstats and perf
//! counters, timer slack. A container without `CAP_SYS_NICE` refuses the first two; they are
//! facts to record and report, and the reason a row that needs one is skipped, never a failure.

use super::sched::{Policy, SchedSettings};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// One thing the host grants or refuses, and in words what (how far, or why not and what
/// would grant it).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Grant {
    pub granted: bool,
    pub detail: String,
}

impl Grant {
    fn yes(detail: impl Into<String>) -> Grant {
        Grant { granted: true, detail: detail.into() }
    }

    fn no(detail: impl Into<String>) -> Grant {
        Grant { granted: false, detail: detail.into() }
    }
}

/// What the host grants taskmeter (run.json: `environment.privileges`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Privileges {
    /// SCHED_FIFO and SCHED_RR (one rule for both): the highest priority a thread may take.
    pub real_time: Grant,
    /// The most negative nice a thread may take.
    pub negative_nice: Grant,
    /// Opening `/dev/cpu_dma_latency` for writing (`--cpu-dma-latency`).
    pub cpu_dma_latency: Grant,
    /// Locking a worker's memory whole (`--mlock`): `CAP_IPC_LOCK` or an unlimited RLIMIT_MEMLOCK.
    pub mlock: Grant,
    /// The kernel's per-thread counters through taskstats (the table's counters).
    pub taskstats: Grant,
    /// `perf_event_open` of a software counter on taskmeter itself.
    pub perf_events: Grant,
    /// Setting a timer slack on a thread (every process may).
    pub timer_slack: Grant,
    /// The highest real-time priority granted (0: none), for the rows that need one.
    #[serde(default)]
    pub real_time_max: u8,
}

/// The facts a refusal is explained from.
#[derive(Clone, Debug, Default, PartialEq)]
struct Facts {
    cap_sys_nice: bool,
    cap_ipc_lock: bool,
    rtprio_limit: Option<u64>,
    nice_limit: Option<u64>,
    memlock_limit: Option<u64>,
    /// The real-time runtime of taskmeter's cpu cgroup (v1 `cpu.rt_runtime_us`) and its path.
    cgroup_rt_runtime: Option<(String, i64)>,
    /// `kernel.sched_rt_runtime_us`: the machine's real-time runtime a period (-1: unlimited).
    machine_rt_runtime: Option<i64>,
}

const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_NICE: u32 = 23;

/// The host's grants, probed on first use.
pub fn probe() -> &'static Privileges {
    static PROBED: OnceLock<Privileges> = OnceLock::new();
    PROBED.get_or_init(|| {
        let facts = facts();
        // On a thread of its own: what it tries is undone when it ends.
        std::thread::spawn(move || probe_on_this_thread(&facts)).join().unwrap_or_else(|_| Privileges {
            real_time: Grant::no("not probed"),
            negative_nice: Grant::no("not probed"),
            cpu_dma_latency: Grant::no("not probed"),
            mlock: Grant::no("not probed"),
            taskstats: Grant::no("not probed"),
            perf_events: Grant::no("not probed"),
            timer_slack: Grant::no("not probed"),
            real_time_max: 0,
        })
    })
}

fn probe_on_this_thread(facts: &Facts) -> Privileges {
    let (real_time, real_time_max) = real_time(facts);
    Privileges {
        real_time,
        real_time_max,
        negative_nice: negative_nice(facts),
        cpu_dma_latency: match std::fs::OpenOptions::new().write(true).open("/dev/cpu_dma_latency") {
            Ok(_) => Grant::yes("permitted"),
            Err(e) => Grant::no(format!(
                "refused ({e}): needs root, or the device passed in (docker run --device /dev/cpu_dma_latency)"
            )),
        },
        mlock: mlock(facts),
        taskstats: match super::taskstats::Taskstats::open().and_then(|mut t| t.process(std::process::id())) {
            Ok(_) => Grant::yes("permitted"),
            Err(e) => Grant::no(format!(
                "refused ({e}): needs root (CAP_NET_ADMIN); the counters are read from /proc instead"
            )),
        },
        perf_events: perf_events(),
        timer_slack: {
            // SAFETY: sets this probing thread's own timer slack.
            match unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) } {
                0 => Grant::yes("permitted"),
                _ => Grant::no(format!("refused ({})", std::io::Error::last_os_error())),
            }
        },
    }
}

/// SCHED_FIFO at priority 1, then the highest allowed: 99, else RLIMIT_RTPRIO's.
fn real_time(facts: &Facts) -> (Grant, u8) {
    let try_fifo = |priority: i32| {
        let param = libc::sched_param { sched_priority: priority };
        // SAFETY: sets this probing thread's own policy.
        match unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    };
    if let Err(e) = try_fifo(1) {
        return (Grant::no(real_time_refusal(facts, &e.to_string())), 0);
    }
    let highest = [99, facts.rtprio_limit.unwrap_or(0).min(99) as i32]
        .into_iter()
        .find(|p| *p >= 1 && try_fifo(*p).is_ok())
        .unwrap_or(1);
    let back = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above; lowering to SCHED_OTHER is always permitted.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &back) };
    (Grant::yes(format!("up to priority {highest}")), highest as u8)
}

/// Why real-time scheduling was refused, and what would grant it: the privilege, and the
/// real-time runtime of taskmeter's cpu cgroup, each where it is missing.
fn real_time_refusal(facts: &Facts, error: &str) -> String {
    let mut missing = Vec::new();
    if !facts.cap_sys_nice && facts.rtprio_limit.unwrap_or(0) == 0 {
        missing.push(format!(
            "needs root or CAP_SYS_NICE (docker run --cap-add SYS_NICE), or an RLIMIT_RTPRIO above 0 (ulimit -r, \
             rtprio in limits.conf; now {})",
            facts.rtprio_limit.map_or("unknown".into(), |l| l.to_string())
        ));
    }
    if facts.machine_rt_runtime == Some(0) {
        missing.push(
            "the machine has no real-time runtime (kernel.sched_rt_runtime_us 0): grant some (sysctl -w \
             kernel.sched_rt_runtime_us=950000)"
                .to_string(),
        );
    }
    if let Some((path, 0)) = &facts.cgroup_rt_runtime {
        missing.push(format!(
            "the cpu cgroup {path} has no real-time runtime (cpu.rt_runtime_us 0): grant some (docker run \
             --cpu-rt-runtime 950000, or write it to that cgroup's cpu.rt_runtime_us)"
        ));
    }
    match missing.is_empty() {
        true => format!("refused ({error})"),
        false => format!("refused ({error}): {}", missing.join("; and ")),
    }
}

fn negative_nice(facts: &Facts) -> Grant {
    // SAFETY: gettid has no preconditions; setpriority on this probing thread.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    let try_nice = |nice: i32| unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } == 0;
    if try_nice(-20) {
        return Grant::yes("down to -20");
    }
    // RLIMIT_NICE r allows a nice down to 20 - r.
    let lowest = 20 - facts.nice_limit.unwrap_or(0).min(40) as i32;
    if lowest < 0 && try_nice(lowest) {
        return Grant::yes(format!("down to {lowest} (RLIMIT_NICE)"));
    }
    Grant::no(format!(
        "refused: needs root or CAP_SYS_NICE (docker run --cap-add SYS_NICE), or an RLIMIT_NICE above 20 \
         (ulimit -e, nice in limits.conf; now {})",
        facts.nice_limit.map_or("unknown".into(), |l| l.to_string())
    ))
}

fn mlock(facts: &Facts) -> Grant {
    match facts.memlock_limit {
        _ if facts.cap_ipc_lock => Grant::yes("unlimited (CAP_IPC_LOCK)"),
        None => Grant::yes("unlimited (RLIMIT_MEMLOCK)"),
        Some(limit) => Grant::no(format!(
            "up to {} KiB (RLIMIT_MEMLOCK), too little to lock a worker: --mlock needs CAP_IPC_LOCK (docker run \
             --cap-add IPC_LOCK) or ulimit -l unlimited",
            limit / 1024
        )),
    }
}

fn perf_events() -> Grant {
    // perf_event_attr, version 0 (64 bytes): a software task clock, user space only, disabled.
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&64u32.to_ne_bytes()); // size
    attr[8..16].copy_from_slice(&1u64.to_ne_bytes()); // PERF_COUNT_SW_TASK_CLOCK
    attr[40..48].copy_from_slice(&(1u64 | 1 << 5 | 1 << 6).to_ne_bytes()); // disabled, exclude_kernel, exclude_hv
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: a valid attribute of its declared size; the descriptor returned is closed below.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, PERF_FLAG_FD_CLOEXEC) };
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok();
    let paranoid = paranoid.as_deref().map_or("unknown", str::trim).to_string();
    if fd < 0 {
        return Grant::no(format!(
            "refused ({}; perf_event_paranoid {paranoid}): needs CAP_PERFMON or a lower kernel.perf_event_paranoid",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: closes the descriptor perf_event_open returned.
    unsafe { libc::close(fd as libc::c_int) };
    Grant::yes(format!("permitted (perf_event_paranoid {paranoid})"))
}

fn facts() -> Facts {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let limit = |resource| {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit fills the struct we own.
        (unsafe { libc::getrlimit(resource, &mut limit) } == 0).then_some(limit.rlim_cur)
    };
    // Unlimited reads as the most the limit can grant: priority 99, nice down to -20.
    let at_most = |l: Option<u64>, most| l.map(|l| if l == libc::RLIM_INFINITY { most } else { l });
    Facts {
        cap_sys_nice: effective & (1 << CAP_SYS_NICE) != 0,
        cap_ipc_lock: effective & (1 << CAP_IPC_LOCK) != 0,
        rtprio_limit: at_most(limit(libc::RLIMIT_RTPRIO), 99),
        nice_limit: at_most(limit(libc::RLIMIT_NICE), 40),
        memlock_limit: limit(libc::RLIMIT_MEMLOCK).filter(|l| *l != libc::RLIM_INFINITY),
        cgroup_rt_runtime: cgroup_rt_runtime(),
        machine_rt_runtime: std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
            .ok()
            .and_then(|s| s.trim().parse().ok()),
    }
}

/// The real-time runtime of taskmeter's cgroup v1 cpu controller, where the kernel has one.
fn cgroup_rt_runtime() -> Option<(String, i64)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "cpu").then(|| (controllers.to_string(), path.to_string()))
    })?;
    let file = format!("/sys/fs/cgroup/{}{}/cpu.rt_runtime_us", path.0, path.1.trim_end_matches('/'));
    let runtime = std::fs::read_to_string(&file).ok()?.trim().parse().ok()?;
    Some((path.1, runtime))
}

/// Why the host refuses what `sched` asks of a worker, with what would grant it; None when it
/// grants it (only a real-time policy needs a privilege: batch, idle and a timer slack do not).
pub fn refusal(sched: &SchedSettings) -> Option<String> {
    refusal_of(sched, probe())
}

fn refusal_of(sched: &SchedSettings, host: &Privileges) -> Option<String> {
    let priority = match sched.policy {
        Some(Policy::Fifo(p) | Policy::Rr(p)) => p,
        _ => return None,
    };
    let policy = sched.policy.expect("a real-time policy");
    if !host.real_time.granted {
        return Some(format!("the host refuses policy {policy}: real-time scheduling is {}", host.real_time.detail));
    }
    (priority > host.real_time_max).then(|| {
        format!(
            "the host refuses policy {policy}: it grants real-time priorities up to {} (RLIMIT_RTPRIO; raise it \
             with ulimit -r or rtprio in limits.conf, or run as root)",
            host.real_time_max
        )
    })
}

impl Privileges {
    /// The env line's part: what is granted, briefly, and what is refused.
    pub fn describe(&self) -> String {
        let mut granted = Vec::new();
        let mut refused = Vec::new();
        let mut say = |grant: &Grant, yes: String, no: &str| match grant.granted {
            true => granted.push(yes),
            false => refused.push(no.to_string()),
        };
        say(&self.real_time, format!("fifo/rr to {}", self.real_time_max), "fifo/rr");
        say(&self.negative_nice, "nice -20".into(), "negative nice");
        say(&self.cpu_dma_latency, "cpu_dma_latency".into(), "cpu_dma_latency");
        say(&self.mlock, "mlock".into(), "mlock");
        say(&self.taskstats, "taskstats".into(), "taskstats");
        match refused.is_empty() {
            true => format!("privileges: {}", granted.join(", ")),
            false => format!("privileges: {} (refused: {})", granted.join(", "), refused.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(real_time: bool, max: u8) -> Privileges {
        let grant = |yes| Grant { granted: yes, detail: "x".into() };
        Privileges {
            real_time: Grant { granted: real_time, detail: "refused (EPERM): needs root".into() },
            negative_nice: grant(false),
            cpu_dma_latency: grant(true),
            mlock: grant(true),
            taskstats: grant(false),
            perf_events: grant(true),
            timer_slack: grant(true),
            real_time_max: max,
        }
    }

    #[test]
    fn only_a_real_time_policy_needs_a_grant_and_its_priority_must_be_within_it() {
        let policy = |p| SchedSettings { policy: Some(p), ..Default::default() };
        let none = host(false, 0);
        assert_eq!(refusal_of(&SchedSettings::default(), &none), None);
        assert_eq!(refusal_of(&policy(Policy::Batch), &none), None);
        assert_eq!(refusal_of(&SchedSettings { timer_slack_ns: Some(1), ..Default::default() }, &none), None);
        let why = refusal_of(&policy(Policy::Fifo(1)), &none).unwrap();
        assert!(why.starts_with("the host refuses policy fifo:1: real-time scheduling is refused (EPERM)"), "{why}");
        let limited = host(true, 10);
        assert_eq!(refusal_of(&policy(Policy::Rr(10)), &limited), None);
        let why = refusal_of(&policy(Policy::Fifo(99)), &limited).unwrap();
        assert!(why.contains("priorities up to 10") && why.contains("ulimit -r"), "{why}");
    }

    #[test]
    fn a_refusal_names_what_would_grant_it() {
        let plain = Facts { rtprio_limit: Some(0), ..Default::default() };
        let why = real_time_refusal(&plain, "Operation not permitted");
        assert!(why.contains("--cap-add SYS_NICE") && why.contains("ulimit -r") && why.ends_with("now 0)"), "{why}");
        let no_runtime = Facts { cap_sys_nice: true, cgroup_rt_runtime: Some(("/ci".into(), 0)), ..Default::default() };
        let why = real_time_refusal(&no_runtime, "Operation not permitted");
        assert!(why.contains("cpu cgroup /ci has no real-time runtime") && why.contains("--cpu-rt-runtime"), "{why}");
        assert!(!why.contains("CAP_SYS_NICE"), "{why}");
        let neither = Facts { cgroup_rt_runtime: Some(("/ci".into(), 0)), ..plain.clone() };
        let why = real_time_refusal(&neither, "Operation not permitted");
        assert!(why.contains("--cap-add SYS_NICE") && why.contains("; and the cpu cgroup /ci"), "{why}");
        let machine = Facts { cap_sys_nice: true, machine_rt_runtime: Some(0), ..plain };
        let why = real_time_refusal(&machine, "Operation not permitted");
        assert!(why.ends_with("(sysctl -w kernel.sched_rt_runtime_us=950000)"), "{why}");
        assert!(mlock(&Facts { memlock_limit: Some(8 << 20), ..Default::default() }).detail.contains("8192 KiB"));
        assert!(mlock(&Facts { cap_ipc_lock: true, memlock_limit: Some(8 << 20), ..Default::default() }).granted);
    }

    #[test]
    fn the_env_line_says_what_is_granted_and_what_is_refused() {
        let line = host(true, 99).describe();
        assert_eq!(line, "privileges: fifo/rr to 99, cpu_dma_latency, mlock (refused: negative nice, taskstats)");
    }

    /// This process's grants are probed without failing, whatever they are.
    #[test]
    fn the_probe_answers_every_question() {
        let host = probe();
        assert!(host.timer_slack.granted, "every process may set its own timer slack");
        assert_eq!(host.real_time.granted, host.real_time_max >= 1);
        for grant in [&host.real_time, &host.negative_nice, &host.cpu_dma_latency, &host.mlock, &host.taskstats] {
            assert!(!grant.detail.is_empty());
        }
    }
}
