//! How often `history check` fails a check (issue 45's goal): on stable histories (every series
//! the same normal draws) and on histories where one series steps by a relative amount at its
//! newest runs. A history is 15 series (as the default runtimes) of RUNS runs each, one value a
//! run (the mean of its repetitions), deviation SD % of the mean.
//! Usage: cargo run --release --example check_rates -- [HISTORIES] [RUNS] [SD_PERCENT] [STEP_PERCENT] [STEP_RUNS]
//!   defaults: 1000 histories, 20 runs, 5 %, 10 %, the newest 5 runs.

use taskmeter::history::check::{check_all, Rule, Verdict};
use taskmeter::history::series::{Key, RunValues};
use taskmeter_analysis::changepoint::Settings;

fn normal(rng: &mut fastrand::Rng, mu: f64, sd: f64) -> f64 {
    let (u, v) = (1.0 - rng.f64(), rng.f64());
    mu + sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

fn main() {
    let arg = |i: usize, default: f64| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (histories, runs, sd, step, step_runs) =
        (arg(1, 1000.0) as usize, arg(2, 20.0) as usize, arg(3, 5.0), arg(4, 10.0), arg(5, 5.0) as usize);
    let keys: Vec<Key> = (0..15)
        .map(|i| Key {
            experiment: "sleep".into(),
            subject: format!("r{i}"),
            point: "-".into(),
            machine: "m".into(),
            ..Key::default()
        })
        .collect();
    let mut rng = fastrand::Rng::with_seed(45);
    let started = std::time::Instant::now();
    for stepped in [false, true] {
        let (mut failed, mut found) = (0, 0);
        for _ in 0..histories {
            let series: Vec<Vec<RunValues>> = (0..keys.len())
                .map(|s| {
                    (0..runs)
                        .map(|i| {
                            let shift =
                                if stepped && s == 0 && i >= runs - step_runs { 1.0 + step / 100.0 } else { 1.0 };
                            RunValues {
                                run: i as i64 + 1,
                                started_at: format!("t{i:03}"),
                                label: None,
                                values: vec![normal(&mut rng, 100.0 * shift, sd)],
                            }
                        })
                        .collect()
                })
                .collect();
            let findings = check_all(
                keys.iter().zip(&series).map(|(k, s)| (k, s.as_slice())),
                Rule { higher_is_better: false, threshold: 0.05, recent: 10 },
                Settings::default(),
            );
            let regressions: Vec<usize> =
                (0..findings.len()).filter(|i| findings[*i].verdict == Verdict::Regression).collect();
            failed += usize::from(!regressions.is_empty());
            found += usize::from(regressions.contains(&0));
        }
        let what = if stepped {
            format!("one series +{step} % over its newest {step_runs} runs")
        } else {
            "stable".to_string()
        };
        println!(
            "{histories} histories of 15 series x {runs} runs (sd {sd} %), {what}: {failed} failed the check ({:.1} %){}",
            100.0 * failed as f64 / histories as f64,
            if stepped { format!(", the stepped series found in {found} ({:.1} %)", 100.0 * found as f64 / histories as f64) } else { String::new() }
        );
    }
    eprintln!("({:.1} s)", started.elapsed().as_secs_f64());
}
