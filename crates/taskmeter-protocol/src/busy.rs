//! The busy work every worker does (protocol: "Busy work"), as reference values to check the
//! `busy_result` a worker reports.

/// The value of `busy(iters)`, computed without the optimiser barriers, to check workers against.
pub fn busy_reference(iters: u64) -> u64 {
    (0..iters).fold(0u64, |t, _| t.wrapping_add(1).wrapping_mul(3) / 2)
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_protocol_reference_values() {
        for (iters, value) in [(0, 0), (1, 1), (2, 3), (3, 6), (10, 138), (1000, 4392425272205558923)] {
            assert_eq!(super::busy_reference(iters), value);
        }
    }
}
