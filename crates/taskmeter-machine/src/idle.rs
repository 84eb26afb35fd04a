//! Machine-wide settings that move wake-up latency, beyond each worker's own scheduling: CPU idle
//! states (and the PM QoS request that keeps CPUs out of the deep ones), frequency scaling, SMT,
//! isolated and tickless CPUs, transparent huge pages. Read for every run, so two runs that
//! differ only here can be told apart; `--cpu-dma-latency` sets the one taskmeter can hold.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

const PM_QOS_FILE: &str = "/dev/cpu_dma_latency";
/// Linux's value when no process holds a request: 2,000 s, i.e. no constraint.
pub const NO_REQUEST_US: i64 = 2_000_000_000;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct MachineSettings {
    /// The cpuidle driver and governor (`/sys/devices/system/cpu/cpuidle`), e.g. "haltpoll".
    pub idle_driver: Option<String>,
    pub idle_governor: Option<String>,
    /// CPU 0's idle states: name, exit latency (µs), and whether disabled.
    pub idle_states: Vec<IdleState>,
    /// The PM QoS CPU latency in force when the run started (`/dev/cpu_dma_latency`, µs), before
    /// taskmeter asked for anything: below 2,000,000,000 another process holds a request.
    pub cpu_dma_latency_us: Option<i64>,
    /// The frequency governor of CPU 0 and whether boost is on; None where the kernel exposes
    /// no cpufreq (a VM whose host manages frequency).
    pub cpufreq_governor: Option<String>,
    pub cpufreq_boost: Option<bool>,
    /// `/sys/devices/system/cpu/smt/control`: on, off, forceoff, notsupported, notimplemented.
    pub smt: Option<String>,
    pub isolated_cpus: Option<String>,
    pub nohz_full_cpus: Option<String>,
    /// Transparent huge pages mode: always, madvise or never.
    pub transparent_hugepages: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct IdleState {
    pub name: String,
    pub exit_latency_us: Option<u64>,
    pub disabled: bool,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl MachineSettings {
    pub fn capture() -> MachineSettings {
        let cpu = "/sys/devices/system/cpu";
        let mut idle_states = Vec::new();
        for i in 0.. {
            let state = format!("{cpu}/cpu0/cpuidle/state{i}");
            let Some(name) = read(&format!("{state}/name")) else { break };
            idle_states.push(IdleState {
                name,
                exit_latency_us: read(&format!("{state}/latency")).and_then(|v| v.parse().ok()),
                disabled: read(&format!("{state}/disable")).as_deref() == Some("1"),
            });
        }
        let thp = read("/sys/kernel/mm/transparent_hugepage/enabled").and_then(|v| {
            v.split_whitespace().find(|w| w.starts_with('[')).map(|w| w.trim_matches(['[', ']']).to_string())
        });
        MachineSettings {
            idle_driver: read(&format!("{cpu}/cpuidle/current_driver")),
            idle_governor: read(&format!("{cpu}/cpuidle/current_governor"))
                .or_else(|| read(&format!("{cpu}/cpuidle/current_governor_ro"))),
            idle_states,
            cpu_dma_latency_us: cpu_dma_latency_us(),
            cpufreq_governor: read(&format!("{cpu}/cpu0/cpufreq/scaling_governor")),
            cpufreq_boost: read(&format!("{cpu}/cpufreq/boost")).map(|v| v == "1"),
            smt: read(&format!("{cpu}/smt/control")),
            isolated_cpus: read(&format!("{cpu}/isolated")),
            nohz_full_cpus: read(&format!("{cpu}/nohz_full")).filter(|v| v != "(null)"),
            transparent_hugepages: thp,
        }
    }

    /// The settings that move latency, in words, for the console's env line; each says why
    /// where it is known to matter.
    pub fn describe(&self, held_by_taskmeter: Option<u32>) -> Vec<String> {
        let mut parts = Vec::new();
        if let Some(driver) = &self.idle_driver {
            let states: Vec<&str> = self.idle_states.iter().filter(|s| !s.disabled).map(|s| s.name.as_str()).collect();
            parts.push(format!("idle {driver} ({})", states.join(", ")));
        }
        let deep_states = self.idle_states.iter().any(|s| !s.disabled && s.exit_latency_us.is_some_and(|l| l > 0));
        match (held_by_taskmeter, self.cpu_dma_latency_us) {
            (Some(us), _) => parts.push(format!("cpu_dma_latency {us} µs held by taskmeter (idle CPUs stay in states that wake within it, as under cyclictest)")),
            (None, Some(us)) if us < NO_REQUEST_US => parts.push(format!("cpu_dma_latency {us} µs held by another process (it lowers wake-up latency for every run)")),
            (None, Some(_)) if deep_states => parts.push(
                "cpu_dma_latency not held: idle CPUs may enter states that add their exit latency to wake-ups (--cpu-dma-latency 0 holds them out, as cyclictest does)".into(),
            ),
            _ => {}
        }
        if self.cpufreq_governor.is_none() && self.idle_driver.is_some() {
            parts.push("no cpufreq exposed".into());
        }
        if let Some(governor) = &self.cpufreq_governor {
            let boost = match self.cpufreq_boost {
                Some(true) => ", boost on",
                Some(false) => ", boost off",
                None => "",
            };
            let note = if governor != "performance" { " (frequency changes move timings)" } else { "" };
            parts.push(format!("cpufreq {governor}{boost}{note}"));
        }
        if let Some(smt) = self.smt.as_deref().filter(|s| *s == "on") {
            parts.push(format!("SMT {smt} (a sibling thread shares the core)"));
        }
        if let Some(cpus) = &self.isolated_cpus {
            parts.push(format!("isolcpus {cpus}"));
        }
        if let Some(cpus) = &self.nohz_full_cpus {
            parts.push(format!("nohz_full {cpus}"));
        }
        if let Some(thp) = self.transparent_hugepages.as_deref().filter(|t| *t == "always") {
            parts.push(format!("THP {thp} (compaction can stall a fault)"));
        }
        parts
    }
}

/// The PM QoS CPU latency limit in force now, µs.
pub fn cpu_dma_latency_us() -> Option<i64> {
    let mut bytes = [0u8; 4];
    std::fs::File::open(PM_QOS_FILE).ok()?.read_exact(&mut bytes).ok()?;
    Some(i32::from_ne_bytes(bytes) as i64)
}

/// A PM QoS request held open: while it lives, no CPU enters an idle state whose exit latency
/// exceeds it (the kernel drops the request when the file is closed).
pub struct LatencyRequest {
    _file: std::fs::File,
    pub us: u32,
}

/// Why a latency request could not be held.
#[derive(Debug)]
pub struct LatencyError(pub String);

impl std::fmt::Display for LatencyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LatencyError {}

impl LatencyRequest {
    pub fn hold(us: u32) -> Result<LatencyRequest, LatencyError> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(PM_QOS_FILE)
            .map_err(|e| LatencyError(format!("--cpu-dma-latency needs to write {PM_QOS_FILE} (root): {e}")))?;
        let value =
            i32::try_from(us).map_err(|_| LatencyError(format!("--cpu-dma-latency {us} is above {}", i32::MAX)))?;
        file.write_all(&value.to_ne_bytes()).map_err(|e| LatencyError(format!("cannot write {PM_QOS_FILE}: {e}")))?;
        Ok(LatencyRequest { _file: file, us })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_env_line_says_why_an_idle_setting_matters() {
        let machine = MachineSettings {
            idle_driver: Some("haltpoll".into()),
            idle_states: vec![
                IdleState { name: "POLL".into(), exit_latency_us: Some(0), disabled: false },
                IdleState { name: "haltpoll idle".into(), exit_latency_us: Some(1), disabled: false },
            ],
            cpu_dma_latency_us: Some(NO_REQUEST_US),
            ..Default::default()
        };
        let free = machine.describe(None).join(" | ");
        assert!(free.contains("idle haltpoll (POLL, haltpoll idle)"), "{free}");
        assert!(free.contains("cpu_dma_latency not held") && free.contains("--cpu-dma-latency 0"), "{free}");
        assert!(machine.describe(Some(0)).join(" ").contains("cpu_dma_latency 0 µs held by taskmeter"));
        let other = MachineSettings { cpu_dma_latency_us: Some(0), ..machine };
        assert!(other.describe(None).join(" ").contains("held by another process"));
    }
}
