//! The distribution of a row's samples, kept in `run.json` so charts and `compare` can be
//! rebuilt from it alone: an HdrHistogram with 5 significant digits (exact below 262 µs,
//! within 0.001 % above), serialised in the V2 format with deflate, then base64.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use std::io::Write;

pub const SIGNIFICANT_DIGITS: u8 = 5;

/// Records the values; negative ones (a wake-up before its deadline) are recorded as 0 and
/// counted by the caller, since the histogram holds only values >= 0.
/// Sorted values record fastest (each run of equal values at once, the counters in order).
pub fn of(values: &[i64]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(SIGNIFICANT_DIGITS).expect("5 significant digits are valid");
    for run in values.chunk_by(|a, b| a == b) {
        h.record_n(run[0].max(0) as u64, run.len() as u64).expect("an auto-resizing histogram takes any value");
    }
    h
}

/// Values below this are exact in a 5-significant-digit HdrHistogram (its first bucket counts
/// every integer): [`SignedHistogram`] counts them in a plain array, which costs a fraction of
/// HdrHistogram's `record` on the hot path of a long run.
const EXACT_BELOW: u64 = 1 << 18;

/// An HdrHistogram of signed values (5 significant digits): the values below 262,144 in an
/// array of counts (exact, as the HdrHistogram's first bucket would be), the larger ones in an
/// HdrHistogram, the magnitudes of the negative ones (a wake-up before its deadline) in another.
/// Values are recorded in sorted batches: one at a time, each would touch a random line of
/// megabytes of counters (a cache miss per value, most of a long run's cost in taskmeter).
#[derive(Clone, Debug, Default)]
pub struct SignedHistogram {
    low: Vec<u64>,
    high: Option<Histogram<u64>>,
    negative: Option<Histogram<u64>>,
    len: u64,
    pending: Vec<i64>,
}

/// Values recorded together, sorted.
const BATCH: usize = 8192;

fn new() -> Histogram<u64> {
    Histogram::<u64>::new(SIGNIFICANT_DIGITS).expect("5 significant digits are valid")
}

impl SignedHistogram {
    #[inline]
    pub fn record(&mut self, value: i64) {
        self.len += 1;
        self.pending.push(value);
        if self.pending.len() >= BATCH {
            self.flush();
        }
    }

    /// Records the pending values, in order, each run of equal ones at once.
    fn flush(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        radsort::sort(&mut pending);
        for run in pending.chunk_by(|a, b| a == b) {
            let (value, count) = (run[0], run.len() as u64);
            if (0..EXACT_BELOW as i64).contains(&value) {
                if self.low.is_empty() {
                    self.low = vec![0; EXACT_BELOW as usize];
                }
                self.low[value as usize] += count;
                continue;
            }
            let h = if value >= 0 { self.high.get_or_insert_with(new) } else { self.negative.get_or_insert_with(new) };
            h.record_n(value.unsigned_abs(), count).expect("an auto-resizing histogram takes any value");
        }
        pending.clear();
        self.pending = pending;
    }

    /// Records what is pending now (so that questions need no copy).
    pub fn settle(&mut self) {
        if !self.pending.is_empty() {
            self.flush();
        }
    }

    /// Records what is pending: before any question is asked.
    fn settled(&self) -> std::borrow::Cow<'_, SignedHistogram> {
        if self.pending.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut settled = self.clone();
        settled.flush();
        std::borrow::Cow::Owned(settled)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// (value, count) of every bucket, in increasing order of value; a bucket's value is its
    /// end farthest from zero (for negative values, nearest zero), so a percentile read from
    /// it is never under-reported.
    fn buckets(&self) -> Vec<(i64, u64)> {
        let settled = self.settled();
        let this = settled.as_ref();
        let mut buckets: Vec<(i64, u64)> = Vec::new();
        if let Some(negative) = &this.negative {
            let mut magnitudes: Vec<(i64, u64)> = negative
                .iter_recorded()
                .map(|v| (-(negative.lowest_equivalent(v.value_iterated_to()) as i64), v.count_at_value()))
                .collect();
            magnitudes.reverse();
            buckets.extend(magnitudes);
        }
        buckets.extend(this.low.iter().enumerate().filter(|(_, c)| **c > 0).map(|(v, c)| (v as i64, *c)));
        if let Some(high) = &this.high {
            buckets.extend(
                high.iter_recorded()
                    .map(|v| (high.highest_equivalent(v.value_iterated_to()) as i64, v.count_at_value())),
            );
        }
        buckets
    }

    /// The value at each 1-based rank in `ranks` (ascending), within the histogram's precision.
    pub fn at_ranks(&self, ranks: &[u64]) -> Vec<i64> {
        let mut values = Vec::with_capacity(ranks.len());
        let (mut seen, mut next) = (0u64, ranks.iter().peekable());
        for (value, count) in self.buckets() {
            seen += count;
            while next.peek().is_some_and(|r| **r <= seen) {
                values.push(value);
                next.next();
            }
        }
        values
    }

    /// The magnitudes of the negative values (how early each wake-up was), if any.
    pub fn negatives(&self) -> Option<Histogram<u64>> {
        self.settled().negative.clone().filter(|n| !n.is_empty())
    }

    /// The histogram as stored in run.json: negative values recorded as 0.
    pub fn clamped(&self) -> Histogram<u64> {
        let settled = self.settled();
        let this = settled.as_ref();
        let mut h = this.high.clone().unwrap_or_else(new);
        let negatives = this.negative.as_ref().map_or(0, |n| n.len());
        for (value, count) in this.low.iter().enumerate().filter(|(_, c)| **c > 0) {
            h.record_n(value as u64, *count).expect("an auto-resizing histogram takes any value");
        }
        if negatives > 0 {
            h.record_n(0, negatives).expect("an auto-resizing histogram takes any value");
        }
        h
    }
}

/// The V2 deflate format (`V2DeflateSerializer`'s: a cookie, the compressed length, a zlib
/// stream of the plain V2 encoding), written with zlib's fastest level: a 5-digit histogram
/// has millions of mostly empty counters, and the default level took most of taskmeter's own
/// CPU time on a 100,000-unit point, for files hardly smaller.
pub fn encode(h: &Histogram<u64>) -> String {
    const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
    let mut plain = Vec::new();
    V2Serializer::new().serialize(h, &mut plain).expect("serialising to memory cannot fail");
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zlib.write_all(&plain).expect("compressing to memory cannot fail");
    let compressed = zlib.finish().expect("compressing to memory cannot fail");
    let mut bytes = Vec::with_capacity(compressed.len() + 8);
    bytes.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
    bytes.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&compressed);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("a histogram is not valid base64: {e}"))?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).map_err(|e| format!("a histogram cannot be read: {e:?}"))
}

/// Several stored histograms as one (e.g. the repetitions of a runtime at a point).
pub fn merge<'a>(texts: impl IntoIterator<Item = &'a String>) -> Result<Histogram<u64>, String> {
    // A fresh histogram resizes itself to any value; a decoded one may not.
    let mut merged = Histogram::<u64>::new(SIGNIFICANT_DIGITS).expect("5 significant digits are valid");
    for text in texts {
        merged.add(decode(text)?).map_err(|e| format!("cannot merge histograms: {e:?}"))?;
    }
    Ok(merged)
}

/// (value, count) at every distinct recorded value, in increasing order, for the rank tests.
pub fn counts(h: &Histogram<u64>) -> Vec<(i64, u64)> {
    h.iter_recorded().map(|v| (h.lowest_equivalent(v.value_iterated_to()) as i64, v.count_at_value())).collect()
}

/// (value, cumulative fraction) at every distinct recorded value, for CDF charts.
pub fn cdf(h: &Histogram<u64>) -> Vec<(u64, f64)> {
    let total = h.len() as f64;
    let mut seen = 0u64;
    h.iter_recorded()
        .map(|v| {
            seen += v.count_at_value();
            (h.highest_equivalent(v.value_iterated_to()), seen as f64 / total)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_small_values_exact() {
        let values = [-5, 0, 1, 17, 250_000, 250_001, 1_000_000_007];
        let h = of(&values);
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), 7);
        assert_eq!(back.count_at(0), 2, "the negative value is recorded as 0");
        assert_eq!(back.count_at(250_000), 1);
        assert_eq!(back.count_at(250_001), 1, "exact below 262 µs");
        assert!(back.equivalent(back.max(), 1_000_000_007), "within 5 significant digits");
        // The same bytes the library's own deflate serialiser would frame, so any V2 reader
        // (HdrHistogram in Java, Python, Go) reads them.
        let mut reference = Vec::new();
        hdrhistogram::serialization::V2DeflateSerializer::new().serialize(&h, &mut reference).unwrap();
        let ours = base64::engine::general_purpose::STANDARD.decode(encode(&h)).unwrap();
        assert_eq!(ours[..4], reference[..4], "the V2 deflate cookie");
        assert_eq!(u32::from_be_bytes(ours[4..8].try_into().unwrap()) as usize, ours.len() - 8);
        assert!(decode("not base64!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }

    #[test]
    fn signed_histograms_rank_negative_values_first() {
        let mut h = SignedHistogram::default();
        for v in [-300, -5, 0, 7, 7, 1_000_000_007] {
            h.record(v);
        }
        assert_eq!(h.len(), 6);
        assert_eq!(h.at_ranks(&[1, 2, 3, 4, 5]), vec![-300, -5, 0, 7, 7]);
        // The same counts, bucket for bucket, as one HdrHistogram of the values >= 0.
        let reference = of(&[0, 7, 7, 1_000_000_007]);
        let ours = h.clamped();
        assert_eq!(ours.len(), 6);
        for v in [7, 1_000_000_007] {
            assert_eq!(ours.count_at(v), reference.count_at(v));
        }
        let top = h.at_ranks(&[6])[0];
        assert!(top >= 1_000_000_007 && (top - 1_000_000_007) as f64 / 1e9 < 1e-5, "{top}");
        assert_eq!(h.clamped().count_at(0), 3);
    }

    #[test]
    fn cdf_ends_at_one() {
        let h = of(&[1, 2, 2, 3]);
        assert_eq!(cdf(&h), vec![(1, 0.25), (2, 0.75), (3, 1.0)]);
    }
}
