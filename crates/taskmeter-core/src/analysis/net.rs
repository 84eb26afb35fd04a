//! The repetitions of each receiver and sender count of `run net` together: the mean throughput
//! with a Student-t interval between repetitions, and the ratio to the receiver's own 1-sender
//! throughput, propagated from both.

use crate::model::net::{NetPoint, NetSummary};
use taskmeter_stats::{ratio_interval, t_interval, Interval};

/// The ratio of a point's mean throughput `mean` to its receiver's mean 1-sender throughput
/// `base`, at `senders`.
///
/// - With 1 sender it is the base over itself: exactly 1 by definition, the reference, with no
///   interval (`Interval::single(1.0)`: no width, no degrees of freedom). Propagating the
///   base's error into it twice, as if the two were independent, would give it a width it does
///   not have.
/// - Otherwise both are means measured over their own repetitions (independent receiver
///   processes), so neither is exact: the delta method (first order) adds their relative
///   variances, `se(r) = r * sqrt((se_m / m)^2 + (se_b / b)^2)`, and the 95 % half-width is
///   `t(0.975, df) * se(r)` with `df` the smaller of the two means' degrees of freedom (a
///   conservative stand-in for Welch-Satterthwaite), as `ratio_interval` computes.
/// - When either mean comes from one repetition its standard error is unknown (not zero): the
///   ratio is then a plain value, no interval, rather than one that takes that mean as exact.
fn ratio(mean: Interval, base: Interval, senders: u32) -> Option<Interval> {
    if base.value <= 0.0 {
        return None;
    }
    Some(match (senders, mean.degrees_of_freedom, base.degrees_of_freedom) {
        (1, _, _) => Interval::single(1.0),
        (_, Some(_), Some(_)) => ratio_interval(&mean, &base),
        _ => Interval::single(mean.value / base.value),
    })
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
        let interval = match values.as_slice() {
            [] => None,
            [one] => Some(Interval::single(*one)),
            many => t_interval(many),
        };
        (values.len() as u32, interval)
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
    fn the_ratio_interval_adds_both_means_relative_variances() {
        // 1 sender: 90, 100, 110 msg/s: mean 100, s 10, se 10/√3 = 5.7735.
        // 2 senders: 180, 200, 220: mean 200, s 20, se 20/√3 = 11.547.
        // ratio 2; relative se sqrt(0.057735² + 0.057735²) = 0.081650, se 0.163299;
        // df min(2, 2) = 2, t(0.975, 2) = 4.302653: half-width 0.702620.
        // (Taking the 1-sender mean as exact would give se 0.115470, half-width 0.496828.)
        let mut points: Vec<NetPoint> = [(1, 90.0), (2, 180.0), (1, 100.0), (2, 200.0), (1, 110.0), (2, 220.0)]
            .iter()
            .enumerate()
            .map(|(i, &(senders, t))| point(senders, i as u32 / 2 + 1, t))
            .collect();
        let summaries = summarise(&mut points);
        assert_eq!(summaries.len(), 2);
        let two = summaries[1].ratio.unwrap();
        assert!((two.value - 2.0).abs() < 1e-12, "{two:?}");
        assert!((two.standard_error - 0.163_299).abs() < 1e-6, "{two:?}");
        assert!((two.half_width - 0.702_620).abs() < 1e-5, "{two:?}");
        assert_eq!(two.degrees_of_freedom, Some(2.0));
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
