//! The jobs of a run: one per runtime, point and repetition, in a shuffled (or the given) order,
//! grouped into batches that run at the same time (`--together`) or one by one.

use std::time::Duration;
use taskmeter_measure::runtimes::RuntimeInfo;
use taskmeter_model::run::Settings;
use taskmeter_model::sweep::Point;

/// One worker to run: a runtime at a point, one repetition of it.
pub struct Job<'a> {
    pub info: &'static RuntimeInfo,
    pub available: &'a Result<(), String>,
    pub point: &'a Point,
    /// 1-based.
    pub repetition: u32,
    pub settings: Settings,
}

impl<'a> Job<'a> {
    /// The scheduling its worker gets: the point's, with the row's knob set.
    pub fn sched(&self) -> taskmeter_machine::sched::SchedSettings {
        self.info.knob.map_or_else(|| self.settings.sched.clone(), |knob| knob.applied_to(&self.settings.sched))
    }

    /// The same job with `iters` busy iterations (`--busy TIME`, fitted before it runs).
    pub fn with_busy_iters(&self, iters: u64) -> Job<'a> {
        let mut settings = self.settings.clone();
        settings.busy.iters = iters;
        Job { settings, ..*self }
    }

    /// "thread", "thread busy=1000 #2": what the progress line calls it.
    pub fn label(&self, points: usize, repeat: u32) -> String {
        let mut label = self.info.id.to_string();
        if points > 1 {
            label = format!("{label} {}", self.point.label());
        }
        if repeat > 1 {
            label = format!("{label} #{}", self.repetition);
        }
        label
    }
}

/// Every (runtime, point, repetition) job, shuffled with `seed` when there is one: interleaving
/// runtimes, points and repetitions keeps a slow drift of the machine from favouring one.
pub fn jobs<'a>(
    points: &'a [Point],
    point_settings: &[Settings],
    availability: &'a [(&'static RuntimeInfo, Result<(), String>)],
    repeat: u32,
    seed: Option<u64>,
) -> Vec<Job<'a>> {
    let mut jobs = Vec::new();
    for (point, settings) in points.iter().zip(point_settings) {
        for repetition in 1..=repeat {
            for (info, available) in availability {
                jobs.push(Job { info, available, point, repetition, settings: settings.clone() });
            }
        }
    }
    if let Some(seed) = seed {
        fastrand::Rng::with_seed(seed).shuffle(&mut jobs);
    }
    jobs
}

/// Together: every runtime of a point (and repetition) at once, in the (shuffled) order of
/// their first job; otherwise one job at a time.
pub fn batches<'j, 'a>(jobs: &'j [Job<'a>], together: bool) -> Vec<Vec<&'j Job<'a>>> {
    if !together {
        return jobs.iter().map(|j| vec![j]).collect();
    }
    let mut order: Vec<(usize, u32)> = Vec::new();
    for job in jobs {
        if !order.contains(&(job.point.index, job.repetition)) {
            order.push((job.point.index, job.repetition));
        }
    }
    order.iter().map(|key| jobs.iter().filter(|j| (j.point.index, j.repetition) == *key).collect()).collect()
}

/// How long the batches should take, for the progress bar's ETA: their rows (one after
/// another, or the longest of those together) and, with `--busy TIME`, every row's probes
/// (`probe_time` each, two a fit), which run one after another before its batch.
pub fn expected_time(batches: &[Vec<&Job>], together: bool, probe_time: impl Fn(&Settings) -> Duration) -> Duration {
    let start = Duration::from_millis(300);
    batches
        .iter()
        .map(|batch| {
            let available = || batch.iter().filter(|j| j.available.is_ok());
            let rows = available().map(|j| Duration::from_nanos(j.settings.warmup_ns + j.settings.duration_ns) + start);
            let rows = if together { rows.max().unwrap_or_default() } else { rows.sum() };
            let probes: Duration = available()
                .filter(|j| j.settings.busy_ns.is_some())
                .map(|j| (probe_time(&j.settings) + start) * 2)
                .sum();
            rows + probes
        })
        .sum()
}
