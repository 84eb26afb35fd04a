//! The repetitions of each receiver and sender count of `run net` together: the mean throughput
//! with its 95 % range for another invocation's mean (`taskmeter_stats::mean_range`), and the
//! ratio to the receiver's own 1-sender throughput with its range on a log scale, from both.

use taskmeter_model::net::{NetPoint, NetSummary};
use taskmeter_stats::{mean_range, ratio_range, Interval};

/// The ratio of a point's mean throughput `mean` to its receiver's mean 1-sender throughput
/// `base`, at `senders`.
///
/// - With 1 sender it is the base over itself: exactly 1 by definition, the reference, with no
///   interval (`Interval::single(1.0)`: no width, no degrees of freedom). Propagating the
///   base's error into it twice, as if the two were independent, would give it a width it does
///   not have.
/// - Otherwise both are means measured over their own repetitions (independent receiver
///   processes), so neither is exact: on a log scale the delta method adds their relative
///   variances, `se(ln r) = sqrt((se_m / m)^2 + (se_b / b)^2)`, and the 95 % range for another
///   invocation's ratio is `r · e^(± t(0.975, df) · √2 · se(ln r))` with `df` the smaller of the
///   two means' degrees of freedom (a conservative stand-in for Welch-Satterthwaite), as
///   `ratio_range` computes: never below 0.
/// - When either mean comes from one repetition its standard error is unknown (not zero): the
///   ratio is then a plain value, no range, rather than one that takes that mean as exact.
fn ratio(mean: Interval, base: Interval, senders: u32) -> Option<Interval> {
    if base.value <= 0.0 {
        return None;
    }
    Some(if senders == 1 { Interval::single(1.0) } else { ratio_range(&mean, &base) })
}

/// The repetitions of each receiver and sender count together, and each point's ratio to its
/// receiver's mean 1-sender throughput.
pub fn summarise(points: &mut [NetPoint]) -> Vec<NetSummary> {
    let mut keys: Vec<(String, u32)> = Vec::new();
    for p in points.iter() {
        if !keys.contains(&(p.receiver.clone(), p.senders)) {
            keys.push((p.receiver.clone(), p.senders));
        }
    }
    let throughput = |points: &[NetPoint], receiver: &str, senders: u32| -> (u32, Option<Interval>) {
        let values: Vec<f64> = points
            .iter()
            .filter(|p| p.receiver == receiver && p.senders == senders && p.error.is_none())
            .filter_map(|p| p.throughput)
            .collect();
        (values.len() as u32, mean_range(&values))
    };
    let mut summaries = Vec::new();
    for (receiver, senders) in keys {
        let (repetitions, mean) = throughput(points, &receiver, senders);
        let base = throughput(points, &receiver, 1).1;
        let ratio = mean.zip(base).and_then(|(m, b)| ratio(m, b, senders));
        // Each repetition's own ratio (summary.csv, the history): its throughput over the mean
        // 1-sender throughput, a plain value.
        for p in points.iter_mut().filter(|p| p.receiver == receiver && p.senders == senders) {
            p.ratio =
                p.throughput.zip(base).filter(|(_, b)| p.error.is_none() && b.value > 0.0).map(|(t, b)| t / b.value);
        }
        summaries.push(NetSummary { receiver, senders, repetitions, throughput: mean, ratio });
    }
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(senders: u32, repetition: u32, throughput: f64) -> NetPoint {
        NetPoint { receiver: "thread".into(), senders, repetition, throughput: Some(throughput), ..Default::default() }
    }

    #[test]
    fn the_ratio_range_adds_both_means_relative_variances_on_a_log_scale() {
        // 1 sender: 90, 100, 110 msg/s: mean 100, s 10, se 10/√3 = 5.7735.
        // 2 senders: 180, 200, 220: mean 200, s 20, se 20/√3 = 11.547.
        // ratio 2; se of ln 2 = sqrt(0.057735² + 0.057735²) = 0.081650; df min(2, 2) = 2,
        // t(0.975, 2) = 4.302653: half-width 4.302653 x √2 x 0.081650 = 0.496828 on the log
        // scale, the range 2 e^-0.496828 = 1.216916 to 2 e^0.496828 = 3.286998.
        let mut points: Vec<NetPoint> = [(1, 90.0), (2, 180.0), (1, 100.0), (2, 200.0), (1, 110.0), (2, 220.0)]
            .iter()
            .enumerate()
            .map(|(i, &(senders, t))| point(senders, i as u32 / 2 + 1, t))
            .collect();
        let summaries = summarise(&mut points);
        assert_eq!(summaries.len(), 2);
        let two = summaries[1].ratio.unwrap();
        assert!((two.value - 2.0).abs() < 1e-12, "{two:?}");
        assert!((two.standard_error - 0.081_650).abs() < 1e-6, "{two:?}");
        assert!((two.half_width - 0.496_828).abs() < 1e-5 && two.log_scale, "{two:?}");
        assert!((two.low() - 1.216_916).abs() < 1e-5 && (two.high() - 3.286_998).abs() < 1e-5, "{two:?}");
        assert_eq!(two.degrees_of_freedom, Some(2.0));
        // The throughput: 100 ± 4.302653 x 10 x sqrt(2/3) = ± 35.13.
        let throughput = summaries[0].throughput.unwrap();
        assert!((throughput.half_width - 35.131).abs() < 1e-3, "{throughput:?}");
        // The 1-sender row is the reference: exactly 1, no interval.
        let one = summaries[0].ratio.unwrap();
        assert_eq!(one, Interval::single(1.0));
        assert_eq!((one.half_width, one.standard_error, one.degrees_of_freedom), (0.0, 0.0, None));
        // Each repetition's ratio is its throughput over the 1-sender mean.
        let ratios: Vec<f64> = points.iter().map(|p| p.ratio.unwrap()).collect();
        assert_eq!(ratios, [0.9, 1.8, 1.0, 2.0, 1.1, 2.2]);
    }

    #[test]
    fn a_mean_of_one_repetition_gives_a_plain_ratio() {
        // 2 senders once: its standard error is unknown, so no interval (not one from the base alone).
        let mut points = vec![point(1, 1, 90.0), point(1, 2, 110.0), point(2, 1, 150.0)];
        let summaries = summarise(&mut points);
        assert_eq!(summaries[1].ratio, Some(Interval::single(1.5)));
        assert_eq!(summaries[0].ratio, Some(Interval::single(1.0)));
        // No 1-sender throughput: no ratio at all.
        let mut points = vec![point(2, 1, 150.0), point(4, 1, 250.0)];
        assert!(summarise(&mut points).iter().all(|s| s.ratio.is_none() && s.throughput.is_some()));
    }
}
