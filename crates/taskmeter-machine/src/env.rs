//! The environment a run happened in: everything that decides timer precision on Linux and
//! that a reader of the numbers needs (cyclictest's lesson).

use serde::{Deserialize, Serialize};
use std::io::Read;
use std::process::Command;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Environment {
    pub hostname: String,
    /// `uname -srvm`
    pub kernel: String,
    pub cpu_model: String,
    pub cores_online: usize,
    pub clocksource: Option<String>,
    /// The orchestrator's own timer slack; each row records what its worker really had.
    pub timer_slack_ns: Option<u64>,
    /// e.g. "PREEMPT_DYNAMIC (preempt=none)" from uname and the kernel configuration.
    pub preemption: Option<String>,
    pub hz: Option<u32>,
    pub high_res_timers: Option<bool>,
    /// e.g. "kvm", "none"; from systemd-detect-virt, or the CPU's hypervisor flag.
    pub virtualisation: Option<String>,
    pub container: Option<String>,
    pub load_average_before: Option<[f64; 3]>,
    pub load_average_after: Option<[f64; 3]>,
    /// Toolchain per runtime used, e.g. {"c-thread": "cc (Debian 12.2.0-14) 12.2.0"}.
    pub toolchains: std::collections::BTreeMap<String, String>,
    /// Idle states, PM QoS, frequency scaling, SMT, isolated CPUs, huge pages.
    #[serde(default)]
    pub machine: crate::idle::MachineSettings,
    /// What the host grants taskmeter (real-time scheduling, negative nice, ...), probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileges: Option<crate::privilege::Privileges>,
}

impl Environment {
    pub fn capture() -> Environment {
        let config = kernel_config();
        let config_value = |key: &str| -> Option<String> {
            let prefix = format!("{key}=");
            config.as_deref()?.lines().find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        };
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let has_hypervisor_flag = cpuinfo.lines().any(|l| l.starts_with("flags") && l.contains(" hypervisor"));
        let virtualisation =
            detect_virt("--vm").or_else(|| has_hypervisor_flag.then(|| "yes (unknown hypervisor)".into()));
        Environment {
            hostname: read("/proc/sys/kernel/hostname").unwrap_or_default(),
            kernel: uname(),
            cpu_model,
            cores_online: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            clocksource: read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            timer_slack_ns: read("/proc/self/timerslack_ns").and_then(|s| s.parse().ok()),
            preemption: preemption(&uname(), config_value("CONFIG_PREEMPT_DYNAMIC").is_some(), config.as_deref()),
            hz: config_value("CONFIG_HZ").and_then(|v| v.parse().ok()),
            high_res_timers: config.as_ref().map(|_| config_value("CONFIG_HIGH_RES_TIMERS").as_deref() == Some("y")),
            virtualisation,
            container: detect_virt("--container"),
            load_average_before: load_average(),
            load_average_after: None,
            toolchains: Default::default(),
            machine: crate::idle::MachineSettings::capture(),
            privileges: Some(crate::privilege::probe().clone()),
        }
    }
}

pub fn load_average() -> Option<[f64; 3]> {
    let text = read("/proc/loadavg")?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn uname() -> String {
    // SAFETY: uname fills a zeroed struct of fixed-size NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {} {} {}", field(&u.sysname), field(&u.release), field(&u.version), field(&u.machine))
}

/// The kernel configuration, from /proc/config.gz or /boot/config-RELEASE.
fn kernel_config() -> Option<String> {
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(file).read_to_string(&mut text).is_ok() {
            return Some(text);
        }
    }
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut u) };
    let release: String = u.release.iter().take_while(|c| **c != 0).map(|c| *c as u8 as char).collect();
    std::fs::read_to_string(format!("/boot/config-{release}")).ok()
}

fn preemption(uname: &str, dynamic: bool, config: Option<&str>) -> Option<String> {
    // The mode in force: the boot command line overrides the configured default.
    let cmdline = read("/proc/cmdline").unwrap_or_default();
    let from_cmdline = cmdline.split_whitespace().find_map(|a| a.strip_prefix("preempt=")).map(str::to_string);
    let from_debugfs = read("/sys/kernel/debug/sched/preempt").and_then(|s| {
        s.split_whitespace().find(|w| w.starts_with('(')).map(|w| w.trim_matches(['(', ')']).to_string())
    });
    let configured = config.and_then(|c| {
        [
            ("CONFIG_PREEMPT_RT=y", "rt"),
            ("CONFIG_PREEMPT=y", "full"),
            ("CONFIG_PREEMPT_LAZY=y", "lazy"),
            ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary"),
            ("CONFIG_PREEMPT_NONE=y", "none"),
        ]
        .iter()
        .find(|(k, _)| c.lines().any(|l| l == *k))
        .map(|(_, v)| v.to_string())
    });
    let mode = from_debugfs.or(from_cmdline).or(configured);
    let model = if uname.contains("PREEMPT_RT") {
        "PREEMPT_RT"
    } else if dynamic || uname.contains("PREEMPT_DYNAMIC") {
        "PREEMPT_DYNAMIC"
    } else if uname.contains("PREEMPT") {
        "PREEMPT"
    } else {
        ""
    };
    match (model, mode) {
        ("", None) => None,
        (m, Some(mode)) => Some(format!("{m} (preempt={mode})").trim().to_string()),
        (m, None) => Some(m.to_string()),
    }
}

fn detect_virt(flag: &str) -> Option<String> {
    let output = Command::new("systemd-detect-virt").arg(flag).output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (!text.is_empty()).then_some(text)
}
