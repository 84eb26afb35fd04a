//! Whether a record read back holds together ([`Consistent`]). `report` and `compare` show what a
//! record says, so a row that refers to no point, a row written twice or counts that disagree
//! with their statistics would be dropped, repeated or shown as they are. Each problem is one
//! sentence that names the row, point or result. Only what taskmeter's own writing makes true is
//! checked, so a record it wrote always passes. Each family checks its own record (its
//! `consistency.rs`); what they share is here.

use std::collections::{BTreeMap, BTreeSet};

/// A kind of record that can say whether it holds together: every problem, one sentence each
/// (empty when it does). `report` and `compare` refuse a record with any
/// (`LoadError::Inconsistent`).
pub trait Consistent {
    fn problems(&self) -> Vec<String>;
}

/// Keys that occur more than once, each with the positions it occurs at, in the order they
/// first occur.
pub fn duplicates<K: Ord>(keys: impl Iterator<Item = K>) -> Vec<(K, Vec<usize>)> {
    let mut at: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (i, key) in keys.enumerate() {
        at.entry(key).or_default().push(i);
    }
    let mut repeated: Vec<(K, Vec<usize>)> = at.into_iter().filter(|(_, positions)| positions.len() > 1).collect();
    repeated.sort_by_key(|(_, positions)| positions[0]);
    repeated
}

/// Each key once, in the order it first occurs.
pub fn first_seen<K: Ord + Copy>(keys: impl Iterator<Item = K>) -> Vec<K> {
    let mut seen = BTreeSet::new();
    keys.filter(|k| seen.insert(*k)).collect()
}

pub fn unique(names: &[String]) -> Vec<&String> {
    first_seen(names.iter())
}

/// "0, 1 and 2".
pub fn listed(positions: &[usize]) -> String {
    match positions {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// Longest name echoed in a problem: a damaged file may hold megabytes in one.
const SHOWN_CHARS: usize = 40;

/// `text`, cut to a readable length.
pub fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_named_with_every_position_in_the_order_they_first_occur() {
        let found = duplicates(["b", "a", "b", "c", "a", "b"].into_iter());
        assert_eq!(found, vec![("b", vec![0, 2, 5]), ("a", vec![1, 4])]);
        assert_eq!(listed(&found[0].1), "0, 2 and 5");
        assert_eq!(listed(&[7]), "7");
        assert!(duplicates([1, 2, 3].into_iter()).is_empty());
    }

    #[test]
    fn a_huge_name_is_cut_to_a_readable_length() {
        assert_eq!(shown("thread"), "thread");
        assert_eq!(shown(&"x".repeat(1_000_000)), format!("{}...", "x".repeat(SHOWN_CHARS)));
        // Cut between characters, never inside one.
        assert_eq!(shown(&"é".repeat(100)).chars().count(), SHOWN_CHARS + 3);
    }
}
