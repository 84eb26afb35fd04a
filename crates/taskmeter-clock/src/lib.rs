//! The protocol's clock, the one every process shares (taskmeter, its workers, its receivers and
//! the record() clients): CLOCK_MONOTONIC in nanoseconds. Its own crate, so that the core and
//! the worker read it without the client library (taskmeter-record, which re-exports it as
//! `taskmeter_record::clock::now_ns`).

/// Nanoseconds on CLOCK_MONOTONIC (the clock of `std::time::Instant` on Linux, read directly so
/// the value can be compared across processes and languages).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::now_ns;

    #[test]
    fn the_clock_is_std_s_monotonic_clock_in_nanoseconds() {
        let (before, start) = (now_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (elapsed, after) = (start.elapsed(), now_ns());
        assert!(after >= before + 5_000_000, "{before} then {after}");
        // Read around Instant's reads: the clock's interval holds Instant's.
        assert!(after - before >= elapsed.as_nanos() as u64, "{} ns < {elapsed:?}", after - before);
    }
}
