//! Scheduling settings the orchestrator gives every worker the same way: applied to the child
//! between fork and exec (policy, priority, timer slack and CPU affinity are inherited across
//! exec), or, for memory locking, which exec undoes, preloaded into the worker.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(into = "String", try_from = "String")]
pub enum Policy {
    Other,
    Batch,
    Idle,
    Fifo(u8),
    Rr(u8),
}

impl Policy {
    pub fn parse(text: &str) -> Result<Policy, String> {
        let (name, priority) = match text.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (text, None),
        };
        let rt_priority = |p: Option<&str>| -> Result<u8, String> {
            let p = p.ok_or_else(|| format!("policy '{name}' needs a priority, e.g. {name}:99"))?;
            match p.parse::<u8>() {
                Ok(v) if (1..=99).contains(&v) => Ok(v),
                _ => Err(format!("priority '{p}' is out of range for {name} (1 to 99)")),
            }
        };
        let no_priority = |p: Option<&str>, policy| match p {
            None => Ok(policy),
            Some(_) => Err(format!("policy '{name}' takes no priority (only fifo and rr do)")),
        };
        match name {
            "other" => no_priority(priority, Policy::Other),
            "batch" => no_priority(priority, Policy::Batch),
            "idle" => no_priority(priority, Policy::Idle),
            "fifo" => rt_priority(priority).map(Policy::Fifo),
            "rr" => rt_priority(priority).map(Policy::Rr),
            _ => Err(format!("unknown policy '{text}' (use other, batch, idle, fifo:PRIO or rr:PRIO)")),
        }
    }

    pub fn is_real_time(self) -> bool {
        matches!(self, Policy::Fifo(_) | Policy::Rr(_))
    }

    fn raw(self) -> (libc::c_int, libc::c_int) {
        match self {
            Policy::Other => (libc::SCHED_OTHER, 0),
            Policy::Batch => (libc::SCHED_BATCH, 0),
            Policy::Idle => (libc::SCHED_IDLE, 0),
            Policy::Fifo(p) => (libc::SCHED_FIFO, p as libc::c_int),
            Policy::Rr(p) => (libc::SCHED_RR, p as libc::c_int),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Other => write!(f, "other"),
            Policy::Batch => write!(f, "batch"),
            Policy::Idle => write!(f, "idle"),
            Policy::Fifo(p) => write!(f, "fifo:{p}"),
            Policy::Rr(p) => write!(f, "rr:{p}"),
        }
    }
}

impl From<Policy> for String {
    fn from(p: Policy) -> String {
        p.to_string()
    }
}

impl TryFrom<String> for Policy {
    type Error = String;
    fn try_from(s: String) -> Result<Policy, String> {
        Policy::parse(&s)
    }
}

/// Runs thread `tid` (taskmeter's reader of a worker, or the worker's writer) above the units, so
/// that however many units compete for the CPUs, samples leave the rings before they fill (16,107
/// busy threads on 2 CPUs kept a writer of equal weight off them for seconds): SCHED_FIFO one
/// above the units' real-time priority (1 under the other policies) where permitted, else nice
/// -20, else unchanged. What it got, in words.
pub fn run_above_units(tid: i32, units: Option<Policy>) -> String {
    let priority = match units.map(Policy::raw) {
        Some((_, p)) if p > 0 => (p + 1).min(99),
        _ => 1,
    };
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: plain system calls on a thread id, with a valid parameter.
    if unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) } == 0 {
        return format!("SCHED_FIFO {priority}");
    }
    let refused = std::io::Error::last_os_error();
    // SAFETY: as above.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20) } == 0 {
        return format!("nice -20 (SCHED_FIFO refused: {refused})");
    }
    format!("unchanged (SCHED_FIFO refused: {refused}; nice -20 refused: {})", std::io::Error::last_os_error())
}

/// The thread of process `pid` named `name` (its `comm`), if it has one.
pub fn thread_named(pid: i32, name: &str) -> Option<i32> {
    let named = |tid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).is_ok_and(|comm| comm.trim_end() == name)
    };
    // A worker starts its writer among its first threads, whose ids most often follow its own:
    // those are looked at first. Listing the threads of a worker of 16,000 made the kernel a
    // directory entry for each of the first thousand or so (1 % of a 100,000-unit run's CPU).
    if let Some(tid) = (pid.saturating_add(1)..=pid.saturating_add(FIRST_THREADS)).find(|tid| named(*tid)) {
        return Some(tid);
    }
    std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten().find_map(|task| {
        let tid = task.file_name().to_str()?.parse().ok()?;
        named(tid).then_some(tid)
    })
}

/// How many of the thread ids after a process's own [`thread_named`] tries before it lists them.
const FIRST_THREADS: i32 = 8;

/// What the user asked for; `None` leaves the worker as taskmeter itself is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct SchedSettings {
    pub policy: Option<Policy>,
    pub timer_slack_ns: Option<u64>,
    pub cpus: Option<Vec<usize>>,
    pub mlock: bool,
}

impl SchedSettings {
    pub fn is_default(&self) -> bool {
        *self == SchedSettings::default()
    }

    /// "policy fifo:99, timer slack 1 ns, cpus 1", for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.policy {
            parts.push(format!("policy {p}"));
        }
        if let Some(s) = self.timer_slack_ns {
            parts.push(format!("timer slack {s} ns"));
        }
        if let Some(c) = &self.cpus {
            parts.push(format!("cpus {}", format_cpus(c)));
        }
        if self.mlock {
            parts.push("mlock".into());
        }
        parts.join(", ")
    }

    /// Applies the settings to the calling process. Runs in the child between fork and exec, so
    /// it only makes system calls (no allocation).
    pub fn apply_in_child(&self, cpu_set: Option<&libc::cpu_set_t>) -> std::io::Result<()> {
        // SAFETY: plain system calls on the calling process with valid arguments.
        unsafe {
            if let Some(ns) = self.timer_slack_ns {
                if libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(set) = cpu_set {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(policy) = self.policy {
                let (raw, priority) = policy.raw();
                let param = libc::sched_param { sched_priority: priority };
                if libc::sched_setscheduler(0, raw, &param) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }

    /// The CPU set for `sched_setaffinity`, built before fork.
    pub fn cpu_set(&self) -> Option<libc::cpu_set_t> {
        let cpus = self.cpus.as_ref()?;
        // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within its bounds (checked
        // when the list was parsed).
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for cpu in cpus {
            unsafe { libc::CPU_SET(*cpu, &mut set) };
        }
        Some(set)
    }
}

/// CPUs the kernel has online, from /sys (e.g. "0-1").
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()).ok())
        .unwrap_or_else(|| (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect())
}

/// The CPUs a process may use at once: its affinity list (`Cpus_allowed_list`, as read back),
/// capped by a cgroup CPU quota (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`), rounded up.
/// The one count the granularity experiment divides by, whatever each runtime counts itself.
pub fn usable_cpus(affinity: &str) -> Option<u32> {
    let allowed = parse_cpu_list(affinity.trim()).ok()?.len() as u32;
    Some(match cgroup_quota() {
        Some(quota) => allowed.min(quota.ceil().max(1.0) as u32),
        None => allowed,
    })
}

/// The CPU quota of this process's cgroup, in CPUs, if it has one.
fn cgroup_quota() -> Option<f64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let quota = if controllers.is_empty() {
            let text = std::fs::read_to_string(format!("/sys/fs/cgroup{path}/cpu.max")).ok()?;
            let mut parts = text.split_whitespace();
            match (parts.next()?, parts.next()?.parse::<f64>().ok()?) {
                ("max", _) => None,
                (quota, period) => Some(quota.parse::<f64>().ok()? / period),
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            let read = |name: &str| {
                std::fs::read_to_string(format!("/sys/fs/cgroup/cpu,cpuacct{path}/{name}"))
                    .or_else(|_| std::fs::read_to_string(format!("/sys/fs/cgroup/cpu{path}/{name}")))
                    .ok()?
                    .trim()
                    .parse::<f64>()
                    .ok()
            };
            match (read("cpu.cfs_quota_us"), read("cpu.cfs_period_us")) {
                (Some(quota), Some(period)) if quota > 0.0 && period > 0.0 => Some(quota / period),
                _ => None,
            }
        } else {
            continue;
        };
        return quota;
    }
    None
}

/// The CPUs of a kernel CPU list ("0-3,8"), sorted, each once.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| format!("'{s}' is not a CPU number"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("CPU range '{part}' runs backwards"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A `--cpus` list, kept whole (one flag value, not one value per CPU).
#[derive(Clone, Debug, PartialEq)]
pub struct CpuList(pub Vec<usize>);

/// Parses `--cpus` ("0", "0,1", "0-3") and checks every CPU is online here.
pub fn parse_cpus(text: &str) -> Result<CpuList, String> {
    check_cpus(text).map(CpuList)
}

fn check_cpus(text: &str) -> Result<Vec<usize>, String> {
    let cpus = parse_cpu_list(text).map_err(|e| format!("invalid --cpus '{text}': {e}"))?;
    let online = online_cpus();
    if let Some(missing) = cpus.iter().find(|c| !online.contains(c) || **c >= libc::CPU_SETSIZE as usize) {
        return Err(format!("CPU {missing} does not exist here (online: {})", format_cpus(&online)));
    }
    Ok(cpus)
}

pub fn format_cpus(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// `--timer-slack`: nanoseconds (a plain number) or a duration (`50us`). Linux reads a slack of
/// 0 as "back to the default", so 0 is refused rather than silently meaning 50 us.
pub fn parse_timer_slack(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("invalid timer slack '{t}': it cannot be negative"));
    }
    let ns = match t.parse::<u64>() {
        Ok(ns) => ns,
        Err(_) => taskmeter_protocol::parse_duration_ns(t).map_err(|e| format!("invalid timer slack: {e}"))?,
    };
    if ns == 0 {
        return Err("a timer slack of 0 means \"the default\" to Linux; use 1 (ns) for the smallest".into());
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twelve named threads of this process are each found by name, whether among the ids just
    /// after the process's (at most eight of them can be) or by listing; a name no thread has
    /// is not.
    #[test]
    fn a_thread_is_found_by_its_name() {
        let (pid, (ids, ready), release) =
            (std::process::id() as i32, std::sync::mpsc::channel(), std::sync::Barrier::new(13));
        std::thread::scope(|scope| {
            for i in 0..12 {
                let (ids, release) = (ids.clone(), &release);
                std::thread::Builder::new()
                    .name(format!("tm-named-{i}"))
                    .spawn_scoped(scope, move || {
                        // SAFETY: gettid has no preconditions.
                        ids.send((i, unsafe { libc::gettid() })).expect("the test waits");
                        release.wait();
                    })
                    .expect("a thread");
            }
            // Looked for while they live, compared once they may end (a failed comparison must
            // not leave them waiting).
            let found: Vec<_> =
                ready.iter().take(12).map(|(i, tid)| (i, tid, thread_named(pid, &format!("tm-named-{i}")))).collect();
            let none = thread_named(pid, "tm-named-none");
            release.wait();
            for (i, tid, found) in found {
                assert_eq!(found, Some(tid), "thread {i}");
            }
            assert_eq!(none, None);
        });
    }

    #[test]
    fn policies_parse_with_their_priorities() {
        assert_eq!(Policy::parse("other"), Ok(Policy::Other));
        assert_eq!(Policy::parse("fifo:99"), Ok(Policy::Fifo(99)));
        assert_eq!(Policy::parse("rr:1"), Ok(Policy::Rr(1)));
        assert_eq!(Policy::parse("idle").unwrap().to_string(), "idle");
        assert!(Policy::parse("fifo").unwrap_err().contains("needs a priority"));
        assert!(Policy::parse("fifo:0").unwrap_err().contains("out of range"));
        assert!(Policy::parse("rr:100").unwrap_err().contains("out of range"));
        assert!(Policy::parse("batch:5").unwrap_err().contains("takes no priority"));
        assert!(Policy::parse("deadline").unwrap_err().contains("unknown policy"));
        let json = serde_json::to_string(&Policy::Fifo(99)).unwrap();
        assert_eq!(json, "\"fifo:99\"");
        assert_eq!(serde_json::from_str::<Policy>(&json).unwrap(), Policy::Fifo(99));
    }

    #[test]
    fn usable_cpus_count_the_affinity_list() {
        // No cgroup quota on the test machine beyond what the affinity allows (a quota can only
        // lower the count).
        assert!(usable_cpus("0").is_some_and(|n| n == 1));
        assert!(usable_cpus("0-3,8").is_some_and(|n| (1..=5).contains(&n)));
        assert_eq!(usable_cpus("nonsense"), None);
    }

    #[test]
    fn cpu_lists_and_slack() {
        assert_eq!(parse_cpu_list("0-2,5,1"), Ok(vec![0, 1, 2, 5]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpus("9999").unwrap_err().contains("does not exist"));
        assert_eq!(parse_cpus("0"), Ok(CpuList(vec![0])));
        assert_eq!(parse_timer_slack("1"), Ok(1));
        assert_eq!(parse_timer_slack("50us"), Ok(50_000));
        assert!(parse_timer_slack("-5").unwrap_err().contains("negative"));
        assert!(parse_timer_slack("0").unwrap_err().contains("default"));
    }
}

/// Scheduling attributes the worker really had, read back from the kernel once it runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct SchedInfo {
    pub policy: String,
    pub priority: i32,
    pub nice: i32,
    pub timerslack_ns: Option<u64>,
    /// CPUs it may run on.
    #[serde(default)]
    pub cpus: Option<String>,
    /// Locked memory (VmLck), kB.
    #[serde(default)]
    pub locked_kb: Option<u64>,
}

impl SchedInfo {
    pub fn of(pid: i32) -> SchedInfo {
        // SAFETY: plain queries about a process we started; failures are reported as -1.
        let policy = unsafe { libc::sched_getscheduler(pid) };
        let mut param = libc::sched_param { sched_priority: 0 };
        unsafe { libc::sched_getparam(pid, &mut param) };
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t) };
        let timerslack_ns =
            std::fs::read_to_string(format!("/proc/{pid}/timerslack_ns")).ok().and_then(|s| s.trim().parse().ok());
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
        let cpus = field("Cpus_allowed_list:");
        let locked_kb = field("VmLck:").and_then(|v| v.trim_end_matches("kB").trim().parse().ok());
        SchedInfo { policy: policy_name(policy), priority: param.sched_priority, nice, timerslack_ns, cpus, locked_kb }
    }
}

pub fn policy_name(policy: i32) -> String {
    match policy {
        libc::SCHED_OTHER => "SCHED_OTHER".into(),
        libc::SCHED_FIFO => "SCHED_FIFO".into(),
        libc::SCHED_RR => "SCHED_RR".into(),
        libc::SCHED_BATCH => "SCHED_BATCH".into(),
        libc::SCHED_IDLE => "SCHED_IDLE".into(),
        other => format!("policy {other}"),
    }
}
