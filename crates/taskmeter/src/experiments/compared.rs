//! What `taskmeter compare` asks of a kind of record ([`Compared`]): what each side measured,
//! subject by subject and invocation by invocation; judging and showing it is `cli::compare`'s,
//! for every kind alike.

use std::any::Any;
use taskmeter_model::run::Metric;

/// What a line is about: its columns and their values (runtime, point, metric...).
pub type Subject = Vec<(&'static str, String)>;

/// What one side measured of each subject, in the order to show: its invocations' values (one
/// per repetition), or why they cannot be compared.
pub type Measured = Vec<(Subject, Result<Vec<Vec<f64>>, String>)>;

/// What the user asked compare to judge.
pub struct Asked {
    /// One metric, or None: every metric (runs of the work loop only).
    pub metric: Option<Metric>,
    /// Judge rows that are not whole (partial, interrupted) too.
    pub include_incomplete: bool,
}

/// A kind of record compare reads: its values by subject, their unit, and which way is better.
pub trait Compared {
    /// The metric compare judges when none is given: the record's own (only a run of the work
    /// loop has one).
    fn default_metric(&self) -> Option<Metric> {
        None
    }
    /// The unit of the values (`ns`, `msg/s`) and whether higher is better (a throughput).
    fn unit(&self) -> (&'static str, bool);
    /// What `side` measured: its records (each one invocation, in order; those of another kind
    /// are passed over, see [`of_kind`]). `self` is the old side's first record, which orders the
    /// lines of both sides alike.
    fn measured(&self, side: &[&dyn Any], ask: &Asked, left_out: &mut LeftOut) -> Measured;
}

/// The records of `side` that are an `R`, each with its invocation (its position in `side`).
pub fn of_kind<'a, R: 'static>(side: &'a [&'a dyn Any]) -> impl Iterator<Item = (usize, &'a R)> {
    side.iter().enumerate().filter_map(|(invocation, record)| Some((invocation, record.downcast_ref::<R>()?)))
}

/// What a comparison left out of its judgement, and why: its results folders by path.
pub type LeftOut = crate::history::query::LeftOut<String>;

/// Whether a repetition is judged: ok, or any with `include`; the others counted.
pub fn whole(status: &str, include: bool, left_out: &mut LeftOut) -> bool {
    if include || status == "ok" {
        return true;
    }
    *left_out.repetitions.entry(status.to_string()).or_default() += 1;
    false
}

/// The invocations of `key` in `found` (added, empty, where new: keys stay in the order they
/// came), at least `count` of them.
pub fn invocations_of<K: PartialEq, T>(found: &mut Vec<(K, Vec<Vec<T>>)>, key: K, count: usize) -> &mut Vec<Vec<T>> {
    let at = found.iter().position(|(k, _)| *k == key).unwrap_or_else(|| {
        found.push((key, Vec::new()));
        found.len() - 1
    });
    let invocations = &mut found[at].1;
    if invocations.len() < count {
        invocations.resize_with(count, Vec::new);
    }
    invocations
}

/// Adds `value` to `subject`'s values in invocation `invocation` (0-based, a side's records in
/// order).
pub fn note(found: &mut Vec<(Subject, Vec<Vec<f64>>)>, subject: Subject, invocation: usize, value: f64) {
    invocations_of(found, subject, invocation + 1)[invocation].push(value);
}
