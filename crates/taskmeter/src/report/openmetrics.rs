//! `--export-openmetrics FILE`: the OpenMetrics 1.0 text format, which is also Prometheus's
//! text format 0.0.4 (only gauges and histograms; `# UNIT` and `# EOF` are comments to its
//! parsers), for a Pushgateway or node_exporter's textfile collector. Each figure is a gauge in
//! the format's base units (seconds, ratios), its 95 % range two more (`..._low_...` and
//! `..._high_...`) where it has one; each row's distribution a histogram of cumulative buckets
//! (`_bucket{le=...}`, with `_count` and `_sum` where the exact sum is known); every sample's
//! labels say its subject, the experiment and the environment. Names and label names are
//! sanitised to the format's rules.

use super::dashboard::{joined_words, Dashboard, Distribution, Unit, BUCKETS_NS};
use std::fmt::Write as _;

/// Every name starts with it (a comparison's with `taskmeter_compare_`).
const PREFIX: &str = "taskmeter_";

/// The exposition: the gauges, then the histograms, then `# EOF`.
pub fn render(dashboard: &Dashboard) -> String {
    let mut out = String::new();
    let mut families: Vec<(String, Family)> = Vec::new();
    for b in dashboard.benchmarks.iter().filter(|b| b.value.is_finite()) {
        let labels = labels(dashboard, &b.subject);
        let (base, suffix, unit) = base_and_unit(&b.measure, b.unit);
        let base = if dashboard.compared { format!("compare_{base}") } else { base };
        let help = format!("{} ({}), from taskmeter {}", b.measure, b.unit.said(), dashboard.source);
        gauge(&mut families, name(&base, "", &suffix), &help, unit, (&labels, in_base_unit(b.value, b.unit)));
        if let Some((low, high)) = b.range {
            for (part, end, value) in [("_low", "low end", low), ("_high", "high end", high)] {
                let help = format!("{end} of the 95 % range of {}, from taskmeter {}", b.measure, dashboard.source);
                let value = in_base_unit(value, b.unit);
                gauge(&mut families, name(&base, part, &suffix), &help, unit, (&labels, value));
            }
        }
        if let Some(verdict) = &b.verdict {
            let mut labels = labels.clone();
            labels.push(("verdict".into(), verdict.clone()));
            let help = format!("1: the verdict of {}, from taskmeter {}", b.measure, dashboard.source);
            gauge(&mut families, format!("{PREFIX}{base}_verdict"), &help, None, (&labels, 1.0));
        }
    }
    for (family_name, family) in &families {
        let _ = writeln!(out, "# TYPE {family_name} gauge");
        if let Some(unit) = family.unit {
            let _ = writeln!(out, "# UNIT {family_name} {unit}");
        }
        let _ = writeln!(out, "# HELP {family_name} {}", escape(&family.help));
        for (labels, value) in &family.samples {
            let _ = writeln!(out, "{family_name}{} {}", label_text(labels), number(*value));
        }
    }
    histograms(&mut out, dashboard);
    out.push_str("# EOF\n");
    out
}

/// A gauge family as it fills: its help, unit and samples, in the order they came.
struct Family {
    help: String,
    unit: Option<&'static str>,
    samples: Vec<(Vec<(String, String)>, f64)>,
}

fn gauge(
    families: &mut Vec<(String, Family)>,
    name: String,
    help: &str,
    unit: Option<&'static str>,
    (labels, value): (&[(String, String)], f64),
) {
    let at = families.iter().position(|(n, _)| *n == name).unwrap_or_else(|| {
        families.push((name, Family { help: help.to_string(), unit, samples: Vec::new() }));
        families.len() - 1
    });
    families[at].1.samples.push((labels.to_vec(), value));
}

/// The histograms of every distribution, one family per measure: its buckets (le in seconds,
/// canonical), `+Inf`, and `_count` with `_sum` where the sum is known.
fn histograms(out: &mut String, dashboard: &Dashboard) {
    let mut measures: Vec<&str> = Vec::new();
    for d in &dashboard.distributions {
        if !measures.contains(&d.measure) {
            measures.push(d.measure);
        }
    }
    for measure in measures {
        let family = format!("{PREFIX}{}_seconds", sanitise(measure));
        let _ = writeln!(out, "# TYPE {family} histogram\n# UNIT {family} seconds");
        let help =
            format!("each row's {measure} (stored at 3 significant digits), from taskmeter {}", dashboard.source);
        let _ = writeln!(out, "# HELP {family} {}", escape(&help));
        for d in dashboard.distributions.iter().filter(|d| d.measure == measure) {
            histogram(out, &family, &labels(dashboard, &d.subject), d);
        }
    }
}

fn histogram(out: &mut String, family: &str, labels: &[(String, String)], d: &Distribution) {
    let with_le = |le: String| {
        let mut labels = labels.to_vec();
        labels.push(("le".into(), le));
        label_text(&labels)
    };
    for (bound, count) in &d.buckets {
        let _ = writeln!(out, "{family}_bucket{} {count}", with_le(le(*bound)));
    }
    let _ = writeln!(out, "{family}_bucket{} {}", with_le("+Inf".into()), d.count);
    // The count stands alone only with the sum (OpenMetrics: _count if and only if _sum).
    if let Some(sum) = d.sum {
        let _ = writeln!(out, "{family}_count{} {}", label_text(labels), d.count);
        let _ = writeln!(out, "{family}_sum{} {}", label_text(labels), number(sum * 1e-9));
    }
}

/// A bucket's bound (in ns, one of [`BUCKETS_NS`]) in seconds, as OpenMetrics's canonical
/// numbers are written (Go's %g, with `.0` where it has no point): `1e-08`, `0.0001`, `2.0`.
fn le(bound_ns: f64) -> String {
    debug_assert!(BUCKETS_NS.contains(&bound_ns));
    let (mut mantissa, mut exponent) = (bound_ns as u64, -9i32);
    while mantissa >= 10 && mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    match exponent {
        e if e < -4 => format!("{mantissa}e-{:02}", -e),
        e if e >= 6 => format!("{mantissa}e+{e:02}"),
        e if e < 0 => format!("{:.*}", (-e) as usize, mantissa as f64 * 10f64.powi(e)),
        e => format!("{}.0", mantissa * 10u64.pow(e as u32)),
    }
}

/// The labels of a sample: the experiment, the subject, then the environment (names sanitised).
/// Each sample says where it was measured: a dashboard keeps each machine, kernel and build
/// apart (OpenMetrics would rather see what every sample shares once, as a target's info, which
/// Prometheus's own text format has no type for).
fn labels(dashboard: &Dashboard, subject: &[(&'static str, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        dashboard.experiment.iter().map(|e| ("experiment".to_string(), e.clone())).collect();
    out.extend(subject.iter().map(|(k, v)| (label_name(k), v.clone())));
    out.extend(dashboard.environment.iter().map(|(k, v)| (label_name(k), v.clone())));
    out
}

fn label_text(labels: &[(String, String)]) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    format!("{{{}}}", inner.join(","))
}

/// A figure's name without its unit, the suffix that names its unit, and the unit as the
/// format's metadata says it (None for a rate: its suffix says per what,
/// `throughput_messages_per_second`).
fn base_and_unit(measure: &str, unit: Unit) -> (String, String, Option<&'static str>) {
    let base = sanitise(measure);
    match unit {
        Unit::Nanoseconds => (base, "seconds".into(), Some("seconds")),
        Unit::Ratio | Unit::Percent => {
            (base.strip_suffix("_ratio").unwrap_or(&base).to_string(), "ratio".into(), Some("ratio"))
        }
        Unit::PerSecond(what) => (base, format!("{}_per_second", sanitise(what)), None),
    }
}

/// `taskmeter_` + base + part + `_` + the unit's suffix.
fn name(base: &str, part: &str, suffix: &str) -> String {
    format!("{PREFIX}{base}{part}_{suffix}")
}

/// A value in the format's base unit: seconds for a time, a ratio for a percentage.
fn in_base_unit(value: f64, unit: Unit) -> f64 {
    match unit {
        Unit::Nanoseconds => value * 1e-9,
        Unit::Percent => value / 100.0,
        Unit::Ratio | Unit::PerSecond(_) => value,
    }
}

/// A number as the format takes it: an integer without a point, else Rust's shortest form.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// Lower case ASCII letters, digits and underscores (`µ` as `u`), one underscore between
/// words, never first a digit: a metric name's part.
pub fn sanitise(text: &str) -> String {
    let out = joined_words(text, '_');
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{out}")
    } else {
        out
    }
}

/// A label's name: sanitised, never `le` (a histogram's), never starting with `__` (reserved).
fn label_name(key: &str) -> String {
    match sanitise(key).trim_start_matches('_') {
        "" => "subject".into(),
        "le" => "subject_le".into(),
        name if name.starts_with(|c: char| c.is_ascii_digit()) => format!("x{name}"),
        name => name.to_string(),
    }
}

/// A label value or help text escaped: backslash, double quote and line feed.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_are_canonical_numbers_in_seconds() {
        let all: Vec<String> = BUCKETS_NS.iter().map(|b| le(*b)).collect();
        assert_eq!(&all[..4], ["1e-08", "2e-08", "5e-08", "1e-07"]);
        assert!(all.contains(&"1e-05".to_string()) && all.contains(&"0.0001".to_string()));
        assert!(all.contains(&"0.002".to_string()) && all.contains(&"0.5".to_string()));
        assert_eq!(&all[all.len() - 4..], ["1.0", "2.0", "5.0", "10.0"]);
    }

    #[test]
    fn names_follow_the_format_s_rules() {
        assert_eq!(sanitise("overhead per task at 1.00 µs"), "overhead_per_task_at_1_00_us");
        assert_eq!(sanitise("METG"), "metg");
        assert_eq!(base_and_unit("new/old ratio", Unit::Ratio), ("new_old".into(), "ratio".into(), Some("ratio")));
        let (base, suffix, unit) = base_and_unit("throughput", Unit::PerSecond("messages"));
        assert_eq!((name(&base, "_low", &suffix), unit), ("taskmeter_throughput_low_messages_per_second".into(), None));
        assert_eq!(name("lateness_p50", "_low", "seconds"), "taskmeter_lateness_p50_low_seconds");
        assert_eq!(label_name("le"), "subject_le");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
