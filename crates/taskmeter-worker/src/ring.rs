//! A unit's ring of samples (protocol: "Storage: the ring"): one producer (the unit), one
//! consumer (the writer), fixed size, written once before the unit parks at the start gate so
//! that storing a sample while measuring never allocates or faults a page in.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use taskmeter_protocol::frames::put_samples;
use taskmeter_protocol::Sample;

pub struct Ring {
    slots: Box<[UnsafeCell<Sample>]>,
    /// Samples ever put; written by the unit only.
    head: AtomicU64,
    /// Samples ever taken; written by the writer only.
    tail: AtomicU64,
}

// SAFETY: a slot is written by the producer only while it lies between head and tail + len
// (free), and read by the consumer only while it lies between tail and head (published);
// head and tail are published with release stores and read with acquire loads.
unsafe impl Sync for Ring {}

impl Ring {
    pub fn new(capacity: u32) -> Ring {
        // Every byte is written here: a non-zero sample, not a zeroed allocation the kernel
        // would map lazily.
        let filler = Sample::from_words([u64::MAX; 6]);
        let slots = (0..capacity.max(1)).map(|_| UnsafeCell::new(filler)).collect();
        Ring { slots, head: AtomicU64::new(0), tail: AtomicU64::new(0) }
    }

    /// Puts a sample (the unit only); false when the ring is full and the sample is lost.
    #[inline]
    pub fn push(&self, sample: Sample) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let len = self.slots.len() as u64;
        if head - self.tail.load(Ordering::Acquire) == len {
            return false;
        }
        // SAFETY: the slot is free (see the Sync impl) and only this producer writes it.
        unsafe { *self.slots[(head % len) as usize].get() = sample };
        self.head.store(head + 1, Ordering::Release);
        true
    }

    /// Takes what the ring holds (the writer only) and appends it to `out` as one `S` frame;
    /// the number of samples taken. `origin_ns` is read after the samples are seen, so a unit
    /// that set its origin before its first sample has it set.
    pub fn drain_into(&self, unit: u32, origin_ns: impl FnOnce() -> u64, out: &mut Vec<u8>) -> u64 {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        if head == tail {
            return 0;
        }
        let origin_ns = origin_ns();
        let len = self.slots.len() as u64;
        // SAFETY: the slots between tail and head are published and not rewritten until the
        // tail moves past them below.
        let samples =
            (0..(head - tail) as usize).map(|i| unsafe { *self.slots[((tail + i as u64) % len) as usize].get() });
        put_samples(out, unit, origin_ns, samples);
        self.tail.store(head, Ordering::Release);
        head - tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskmeter_protocol::frames::{decode, FrameReader};

    fn sample(period: u64) -> Sample {
        Sample { period, ..Sample::default() }
    }

    #[test]
    fn a_full_ring_refuses_and_a_drained_one_takes_again_in_order() {
        let ring = Ring::new(3);
        assert!((0..3).all(|p| ring.push(sample(p))));
        assert!(!ring.push(sample(3)), "full");
        let mut out = Vec::new();
        assert_eq!(ring.drain_into(7, || 11, &mut out), 3);
        assert_eq!(ring.drain_into(7, || 11, &mut out), 0, "nothing new");
        assert!((4..6).all(|p| ring.push(sample(p))), "wraps around");
        assert_eq!(ring.drain_into(7, || 11, &mut out), 2);
        let mut reader = FrameReader::new(out.as_slice());
        let mut periods = Vec::new();
        while let Some((kind, payload)) = reader.next_raw().unwrap() {
            let taskmeter_protocol::Frame::Samples(chunk) = decode(kind, payload).unwrap() else { panic!("S frames") };
            assert_eq!((chunk.unit, chunk.origin_ns), (7, 11));
            periods.extend(chunk.samples().map(|s| s.period));
        }
        assert_eq!(periods, [0, 1, 2, 4, 5]);
    }

    #[test]
    fn a_producer_and_a_consumer_on_two_threads_lose_nothing_they_do_not_count() {
        let ring = std::sync::Arc::new(Ring::new(64));
        let producer = {
            let ring = ring.clone();
            std::thread::spawn(move || (0..200_000u64).filter(|p| !ring.push(sample(*p))).count() as u64)
        };
        let mut out = Vec::new();
        let mut taken = 0;
        while !producer.is_finished() {
            taken += ring.drain_into(1, || 0, &mut out);
        }
        let lost = producer.join().unwrap();
        taken += ring.drain_into(1, || 0, &mut out);
        assert_eq!(taken + lost, 200_000);
        // What was taken arrives in the order it was put, each sample once.
        let mut reader = FrameReader::new(out.as_slice());
        let mut periods = Vec::new();
        while let Some((kind, payload)) = reader.next_raw().unwrap() {
            let taskmeter_protocol::Frame::Samples(chunk) = decode(kind, payload).unwrap() else { panic!("S frames") };
            periods.extend(chunk.samples().map(|s| s.period));
        }
        assert_eq!(periods.len() as u64, taken);
        assert!(periods.windows(2).all(|w| w[0] < w[1]));
    }
}
