//! A unit's ring of samples (protocol: "Storage: the ring"): one producer (the unit) and two
//! consumers (the writer, and the unit itself when it finds the ring full), fixed size, written
//! once before the unit parks at the start gate so that storing a sample while measuring never
//! allocates or faults a page in.

use std::sync::atomic::{AtomicU64, Ordering};
use taskmeter_protocol::frames::{put_samples, ChunkHead};
use taskmeter_protocol::Sample;

pub struct Ring {
    /// A sample's four words on the wire each, stored and loaded relaxed (plain moves): a
    /// consumer's copy may race the unit's next write of the slot, and is then thrown away (a
    /// seqlock's read).
    slots: Box<[[AtomicU64; 4]]>,
    /// Samples ever put; written by the unit only.
    head: AtomicU64,
    /// Samples ever taken; moved forward by a compare-and-swap by whichever consumer took them.
    tail: AtomicU64,
}

// A slot is written by the producer only while it lies between head and tail + len (free), and
// read by a consumer while it lies between tail and head (published); head is published with a
// release store, tail moved with a compare-and-swap: a consumer that copied slots keeps its copy
// only if its swap from the tail it read succeeds, so a copy the unit may have overwritten (after
// taking those samples itself) is never sent.
impl Ring {
    pub fn new(capacity: u32) -> Ring {
        // Every byte is written here: a non-zero sample, not a zeroed allocation the kernel
        // would map lazily.
        let slots = (0..capacity.max(1)).map(|_| std::array::from_fn(|_| AtomicU64::new(u64::MAX))).collect();
        Ring { slots, head: AtomicU64::new(0), tail: AtomicU64::new(0) }
    }

    /// Puts a sample (the unit only); false when the ring is full.
    #[inline]
    pub fn push(&self, sample: Sample) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let len = self.slots.len() as u64;
        if head - self.tail.load(Ordering::Acquire) == len {
            return false;
        }
        let slot = &self.slots[(head % len) as usize];
        for (word, value) in slot.iter().zip(sample.wire_words()) {
            word.store(value, Ordering::Relaxed);
        }
        self.head.store(head + 1, Ordering::Release);
        true
    }

    /// The unit takes what its full ring holds, to write it itself (the protocol's `F` frame):
    /// appends the frame to `out` and returns the number of samples, 0 when the writer took
    /// them meanwhile (the ring has room again). The unit only: its slots cannot change under it.
    pub fn take_own(&self, unit: u32, origin_ns: u64, out: &mut Vec<u8>) -> u64 {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if head == tail || self.tail.compare_exchange(tail, head, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return 0;
        }
        let head_of = ChunkHead { unit, origin_ns, first: tail, by_unit: true };
        self.put_frame(head_of, tail, head, out);
        head - tail
    }

    /// Takes what the ring holds (the writer only) and appends it to `out` as one `S` frame;
    /// the number of samples taken. `origin_ns` is read after the samples are seen, so a unit
    /// that set its origin before its first sample has it set.
    pub fn drain_into(&self, unit: u32, origin_ns: impl FnOnce() -> u64, out: &mut Vec<u8>) -> u64 {
        let tail = self.tail.load(Ordering::Acquire);
        let head = self.head.load(Ordering::Acquire);
        if head == tail {
            return 0;
        }
        let before = out.len();
        self.put_frame(ChunkHead { unit, origin_ns: origin_ns(), first: tail, by_unit: false }, tail, head, out);
        if self.tail.compare_exchange(tail, head, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // The unit took these samples itself while they were copied.
            out.truncate(before);
            return 0;
        }
        head - tail
    }

    fn put_frame(&self, head_of: ChunkHead, tail: u64, head: u64, out: &mut Vec<u8>) {
        let len = self.slots.len() as u64;
        let samples = (0..(head - tail) as usize).map(|i| {
            let position = tail + i as u64;
            let slot = &self.slots[(position % len) as usize];
            // The period is not on the wire: the position stands in.
            Sample::from_wire_words(position, std::array::from_fn(|w| slot[w].load(Ordering::Relaxed)))
        });
        put_samples(out, head_of, samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskmeter_protocol::frames::{decode, FrameReader};
    use taskmeter_protocol::Frame;

    /// The `p`-th sample put, told by its start (what the wire carries of it).
    fn sample(p: u64) -> Sample {
        Sample { start_ns: p, ..Sample::default() }
    }

    /// Each frame's (first position, by the unit, the starts of its samples).
    fn frames(bytes: &[u8]) -> Vec<(u64, bool, Vec<u64>)> {
        let mut reader = FrameReader::new(bytes);
        let mut all = Vec::new();
        while let Some((kind, payload)) = reader.next_raw().unwrap() {
            let Frame::Samples(chunk) = decode(kind, payload).unwrap() else { panic!("sample frames") };
            assert_eq!((chunk.unit, chunk.origin_ns), (7, 11));
            all.push((chunk.first, chunk.by_unit, chunk.samples().map(|s| s.start_ns).collect()));
        }
        all
    }

    #[test]
    fn a_full_ring_refuses_and_is_taken_by_the_writer_or_the_unit_in_order() {
        let ring = Ring::new(3);
        assert!((0..3).all(|p| ring.push(sample(p))));
        assert!(!ring.push(sample(3)), "full");
        let mut out = Vec::new();
        assert_eq!(ring.drain_into(7, || 11, &mut out), 3);
        assert_eq!(ring.drain_into(7, || 11, &mut out), 0, "nothing new");
        assert!((3..6).all(|p| ring.push(sample(p))), "wraps around");
        assert_eq!(ring.take_own(7, 11, &mut out), 3, "the unit takes its full ring");
        assert_eq!(ring.take_own(7, 11, &mut out), 0, "an empty ring has nothing to take");
        assert!(ring.push(sample(6)));
        assert_eq!(ring.drain_into(7, || 11, &mut out), 1);
        assert_eq!(frames(&out), [(0, false, vec![0, 1, 2]), (3, true, vec![3, 4, 5]), (6, false, vec![6])]);
    }

    /// The unit takes its ring itself whenever it is full, while a writer drains it: every
    /// sample arrives exactly once, and ordered by their first position the frames hold them in
    /// the order they were put, whoever sent them.
    #[test]
    fn a_unit_and_a_writer_taking_the_same_ring_lose_and_repeat_nothing() {
        const SAMPLES: u64 = 300_000;
        let ring = std::sync::Arc::new(Ring::new(16));
        let producer = {
            let ring = ring.clone();
            std::thread::spawn(move || {
                let mut own = Vec::new();
                for p in 0..SAMPLES {
                    if !ring.push(sample(p)) {
                        ring.take_own(7, 11, &mut own);
                        assert!(ring.push(sample(p)), "a ring taken or drained has room");
                    }
                }
                own
            })
        };
        let mut out = Vec::new();
        while !producer.is_finished() {
            ring.drain_into(7, || 11, &mut out);
        }
        let own = producer.join().unwrap();
        ring.drain_into(7, || 11, &mut out);
        // (How the two shared them depends on the scheduling: not asserted.)
        let mut all = frames(&out);
        all.extend(frames(&own));
        all.sort_by_key(|(first, ..)| *first);
        let mut next = 0;
        for (first, _, starts) in &all {
            assert_eq!(*first, next, "frames meet end to end");
            assert_eq!(
                *starts,
                (next..next + starts.len() as u64).collect::<Vec<_>>(),
                "a frame holds its positions' samples"
            );
            next += starts.len() as u64;
        }
        assert_eq!(next, SAMPLES);
    }
}
