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

/// Values below this are exact in a 5-significant-digit HdrHistogram: its first bucket counts
/// every integer.
const EXACT_BELOW: u64 = 1 << 18;

/// An HdrHistogram of signed values, 5 significant digits (exact below 262,144, within 1/2^17
/// above): the values >= 0 counted at their index in the library's layout ([`counts_index`]),
/// the magnitudes of the negative ones (a wake-up before its deadline) the same way apart. The
/// counters are in pages allocated as values reach them: a row's values cluster, so it touches
/// a few, where the library's dense array of up to millions of counters was zeroed, grown and
/// scanned whole for every question (most of taskmeter's CPU at 10,000 units). What it encodes
/// is the library's, byte for byte (tested).
/// An exact one ([`SignedHistogram::exact`]) keeps the values outside 0..262,144 as they are
/// until [`SignedHistogram::make_approximate`]: its ranks are then the values' own, at the cost
/// of 8 bytes for each such value only.
/// Values are counted in batches sorted by counter: one at a time, each would touch a random
/// line of the counters (a cache miss per value while the worker's units share the CPUs and
/// caches).
#[derive(Clone, Debug, Default)]
pub struct SignedHistogram {
    positive: Counters,
    negative: Counters,
    len: u64,
    /// The values outside 0..262,144, while exact.
    outliers: Option<Vec<i64>>,
    pending: Vec<i64>,
}

/// Counters by index, in pages of [`PAGE`] allocated on first use.
#[derive(Clone, Debug, Default)]
struct Counters {
    pages: Vec<Option<Box<[u64]>>>,
}

const PAGE: usize = 4096;

impl Counters {
    fn add(&mut self, index: usize, count: u64) {
        let page = index / PAGE;
        if page >= self.pages.len() {
            self.pages.resize(page + 1, None);
        }
        self.pages[page].get_or_insert_with(|| vec![0; PAGE].into_boxed_slice())[index % PAGE] += count;
    }

    /// (index, count) of every counter above 0, in increasing order of index.
    fn iter(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.pages.iter().enumerate().filter_map(|(i, page)| Some((i, page.as_ref()?))).flat_map(|(i, page)| {
            page.iter().enumerate().filter(|(_, c)| **c > 0).map(move |(j, c)| (i * PAGE + j, *c))
        })
    }

    fn total(&self) -> u64 {
        self.iter().map(|(_, c)| c).sum()
    }

    /// Adds another's counts, page by page.
    fn absorb(&mut self, other: Counters) {
        if self.pages.len() < other.pages.len() {
            self.pages.resize(other.pages.len(), None);
        }
        for (mine, theirs) in self.pages.iter_mut().zip(other.pages) {
            match (mine.as_mut(), theirs) {
                (_, None) => {}
                (None, theirs) => *mine = theirs,
                (Some(mine), Some(theirs)) => mine.iter_mut().zip(theirs.iter()).for_each(|(a, b)| *a += b),
            }
        }
    }
}

/// Values counted together.
const BATCH: usize = 8192;

impl SignedHistogram {
    /// One that keeps every value exactly.
    pub fn exact() -> SignedHistogram {
        SignedHistogram { outliers: Some(Vec::new()), ..Default::default() }
    }

    #[cfg(test)]
    fn is_exact(&self) -> bool {
        self.outliers.is_some()
    }

    #[inline]
    pub fn record(&mut self, value: i64) {
        self.len += 1;
        self.pending.push(value);
        if self.pending.len() >= BATCH {
            self.flush();
        }
    }

    /// Adds another's values as if each had been recorded here; exact only if both were.
    pub fn absorb(&mut self, mut other: SignedHistogram) {
        if self.outliers.is_some() && other.outliers.is_none() {
            self.make_approximate();
        }
        self.len += other.len;
        self.positive.absorb(std::mem::take(&mut other.positive));
        self.negative.absorb(std::mem::take(&mut other.negative));
        // Values not yet counted are counted here, as this one's own: kept exact, or counted.
        self.pending.append(&mut other.pending);
        match (&mut self.outliers, other.outliers) {
            (Some(mine), Some(mut theirs)) => mine.append(&mut theirs),
            (None, Some(mut theirs)) => self.pending.append(&mut theirs),
            (_, None) => {}
        }
        if self.pending.len() >= BATCH {
            self.flush();
        }
    }

    /// Trades the values kept exactly for their counters.
    pub fn make_approximate(&mut self) {
        self.flush();
        if let Some(outliers) = self.outliers.take() {
            self.pending = outliers;
            self.flush();
        }
    }

    /// Records the pending values: each counter's in one addition, in order of index (sorting
    /// the indices, not the values: three passes of a radix sort rather than eight).
    fn flush(&mut self) {
        let (mut positive, mut negative) = (Vec::with_capacity(self.pending.len()), Vec::new());
        for &value in &self.pending {
            match &mut self.outliers {
                Some(outliers) if !(0..EXACT_BELOW as i64).contains(&value) => outliers.push(value),
                _ if value < 0 => negative.push(counts_index(value.unsigned_abs()) as u32),
                _ => positive.push(counts_index(value as u64) as u32),
            }
        }
        self.pending.clear();
        for (indices, counters) in [(&mut positive, &mut self.positive), (&mut negative, &mut self.negative)] {
            radsort::sort(indices);
            for run in indices.chunk_by(|a, b| a == b) {
                counters.add(run[0] as usize, run.len() as u64);
            }
        }
    }

    /// Records what is pending and sorts the exact values (so that questions need no copy).
    pub fn settle(&mut self) {
        if !self.pending.is_empty() {
            self.flush();
        }
        if let Some(outliers) = &mut self.outliers {
            if !outliers.is_sorted() {
                radsort::sort(outliers);
            }
        }
    }

    /// Settled: before any question is asked.
    fn settled(&self) -> std::borrow::Cow<'_, SignedHistogram> {
        let sorted = self.outliers.as_ref().is_none_or(|o| o.is_sorted());
        if self.pending.is_empty() && sorted {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut settled = self.clone();
        settled.settle();
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
    /// it is never under-reported. An exact histogram's buckets are its distinct values.
    fn buckets(&self) -> Vec<(i64, u64)> {
        let settled = self.settled();
        let this = settled.as_ref();
        let outliers = this.outliers.as_deref().unwrap_or_default();
        let split = outliers.partition_point(|v| *v < 0);
        let runs = |values: &[i64]| -> Vec<(i64, u64)> {
            values.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() as u64)).collect()
        };
        let mut buckets = runs(&outliers[..split]);
        let mut negative: Vec<(i64, u64)> =
            this.negative.iter().map(|(i, c)| (-(index_range(i).0 as i64), c)).collect();
        negative.reverse();
        buckets.extend(negative);
        // Exact values above the counted range and counters above it never coexist.
        let (low, high): (Vec<_>, Vec<_>) = this.positive.iter().partition(|(i, _)| (*i as u64) < EXACT_BELOW);
        buckets.extend(low.into_iter().map(|(i, c)| (i as i64, c)));
        buckets.extend(runs(&outliers[split..]));
        buckets.extend(high.into_iter().map(|(i, c)| (index_range(i).1 as i64, c)));
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
    #[cfg(test)]
    fn negatives(&self) -> Option<Histogram<u64>> {
        self.encode_negatives().map(|text| decode(&text).expect("our own encoding"))
    }

    /// The histogram as stored in run.json: negative values recorded as 0.
    #[cfg(test)]
    fn clamped(&self) -> Histogram<u64> {
        decode(&self.encode_clamped()).expect("our own encoding")
    }

    /// The histogram as stored in run.json (negative values recorded as 0), encoded: what
    /// [`encode`] writes for the library's histogram of the same values.
    pub fn encode_clamped(&self) -> String {
        let settled = self.settled();
        let this = settled.as_ref();
        let outliers = this.outliers.as_deref().unwrap_or_default();
        let split = outliers.partition_point(|v| *v < 0);
        let below_zero = this.negative.total() + split as u64;
        let kept = outliers[split..].chunk_by(|a, b| a == b).map(|run| (run[0] as u64, run.len() as u64));
        let mut values: Vec<(u64, u64)> = std::iter::once((0, below_zero))
            .chain(this.positive.iter().map(|(i, c)| (index_range(i).1, c)))
            .chain(kept)
            .collect();
        values.sort_unstable(); // in order already, unless kept values and counters ever mixed
        encode_sparse(values)
    }

    /// How early the values below 0 were (their magnitudes), encoded; None without any.
    pub fn encode_negatives(&self) -> Option<String> {
        let settled = self.settled();
        let this = settled.as_ref();
        let outliers = this.outliers.as_deref().unwrap_or_default();
        let exact = outliers[..outliers.partition_point(|v| *v < 0)].chunk_by(|a, b| a == b);
        let mut magnitudes: Vec<(u64, u64)> = exact
            .map(|run| (run[0].unsigned_abs(), run.len() as u64))
            .chain(this.negative.iter().map(|(i, c)| (index_range(i).1, c)))
            .collect();
        magnitudes.sort_unstable();
        (!magnitudes.is_empty()).then(|| encode_sparse(magnitudes))
    }
}

/// The V2 deflate format (`V2DeflateSerializer`'s: a cookie, the compressed length, a zlib
/// stream of the plain V2 encoding), written with zlib's fastest level: a 5-digit histogram
/// has millions of mostly empty counters, and the default level took most of taskmeter's own
/// CPU time on a 100,000-unit point, for files hardly smaller.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut plain = Vec::new();
    V2Serializer::new().serialize(h, &mut plain).expect("serialising to memory cannot fail");
    compress(&plain)
}

/// A plain V2 encoding in the V2 deflate frame, base64.
fn compress(plain: &[u8]) -> String {
    const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zlib.write_all(plain).expect("compressing to memory cannot fail");
    let compressed = zlib.finish().expect("compressing to memory cannot fail");
    let mut bytes = Vec::with_capacity(compressed.len() + 8);
    bytes.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
    bytes.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&compressed);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The index of `value` in the counts of an HdrHistogram of 5 significant digits from 1 (the
/// library's layout: bucket 0 counts 0 to 2^18 - 1 one by one, each later bucket has half as
/// many counters, twice as wide).
fn counts_index(value: u64) -> usize {
    let bucket = 64 - 18 - (value | (EXACT_BELOW - 1)).leading_zeros();
    let sub_bucket = (value >> bucket) as usize;
    ((bucket as usize + 1) << HALF_MAGNITUDE) + sub_bucket - (1 << HALF_MAGNITUDE)
}

/// Half of the 2^18 counters of a bucket, as a power of two.
const HALF_MAGNITUDE: u32 = 17;

/// The lowest and highest value counted at `index` (the inverse of [`counts_index`]).
fn index_range(index: usize) -> (u64, u64) {
    if (index as u64) < EXACT_BELOW {
        return (index as u64, index as u64);
    }
    let bucket = (index >> HALF_MAGNITUDE) as u32 - 1;
    let sub_bucket = ((index & ((1 << HALF_MAGNITUDE) - 1)) + (1 << HALF_MAGNITUDE)) as u64;
    (sub_bucket << bucket, ((sub_bucket + 1) << bucket) - 1)
}

/// The V2 deflate encoding of (value, count) pairs in increasing order of value, as [`encode`]
/// writes it for an HdrHistogram of 5 significant digits holding them, byte for byte. Written
/// from the pairs alone: building that histogram meant zeroing megabytes of counters for each
/// of a row's eight stored distributions, most of taskmeter's own CPU in a run of short rows.
fn encode_sparse(values: impl IntoIterator<Item = (u64, u64)>) -> String {
    fn zig_zag_varint(out: &mut Vec<u8>, n: i64) {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        while z >= 0x80 {
            out.push(0x80 | (z & 0x7f) as u8);
            z >>= 7;
        }
        out.push(z as u8);
    }
    let (mut counts, mut next, mut highest) = (Vec::new(), 0usize, 0u64);
    let mut pending: Option<(usize, u64)> = None;
    let put = |counts: &mut Vec<u8>, next: &mut usize, (index, count): (usize, u64)| {
        // A run of empty counters is written as its negated length (a single one as a 0).
        match index - *next {
            0 => {}
            1 => zig_zag_varint(counts, 0),
            zeros => zig_zag_varint(counts, -(zeros as i64)),
        }
        zig_zag_varint(counts, count as i64);
        *next = index + 1;
    };
    for (value, count) in values.into_iter().filter(|(_, c)| *c > 0) {
        let index = counts_index(value);
        highest = highest.max(value);
        pending = match pending {
            Some((i, c)) if i == index => Some((i, c + count)),
            Some(done) => {
                put(&mut counts, &mut next, done);
                Some((index, count))
            }
            None => Some((index, count)),
        };
    }
    match pending {
        Some(last) => put(&mut counts, &mut next, last),
        None => zig_zag_varint(&mut counts, 0), // an empty histogram: one empty counter
    }
    let mut plain = Vec::with_capacity(40 + counts.len());
    plain.extend_from_slice(&(0x1c84_9303u32 | 0x10).to_be_bytes()); // V2
    plain.extend_from_slice(&(counts.len() as u32).to_be_bytes());
    plain.extend_from_slice(&0u32.to_be_bytes()); // normalizing index offset
    plain.extend_from_slice(&u32::from(SIGNIFICANT_DIGITS).to_be_bytes());
    plain.extend_from_slice(&1u64.to_be_bytes()); // lowest discernible value
    plain.extend_from_slice(&highest.max(2).to_be_bytes());
    plain.extend_from_slice(&1.0f64.to_be_bytes()); // integer to double ratio
    plain.extend_from_slice(&counts);
    compress(&plain)
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
    fn an_exact_histogram_ranks_every_value_as_a_sorted_list_would() {
        // Values on both sides of the counted range, out of order, with repeats.
        let values = [300_000, -40, 5, 262_143, 262_144, -40, 7, 1_000_000_007, 5, -1, 0, 300_000];
        let mut exact = SignedHistogram::exact();
        values.iter().for_each(|v| exact.record(*v));
        let mut sorted = values.to_vec();
        sorted.sort();
        let ranks: Vec<u64> = (1..=values.len() as u64).collect();
        assert_eq!(exact.at_ranks(&ranks), sorted);
        assert_eq!(exact.negatives().unwrap().len(), 3);
        assert_eq!(exact.clamped().count_at(0), 4, "three negative values and one 0");
        // Approximate afterwards: the same counts, ranks within 5 significant digits.
        exact.make_approximate();
        assert!(!exact.is_exact());
        assert_eq!(exact.len(), values.len() as u64);
        let approximate = exact.at_ranks(&ranks);
        assert_eq!(approximate[..8], sorted[..8], "exact below 262,144");
        for (a, v) in approximate.iter().zip(&sorted).skip(8) {
            assert!(a >= v && (a - v) as f64 / *v as f64 <= 1e-5, "{a} for {v}");
        }
    }

    #[test]
    fn counters_are_indexed_as_the_library_s_buckets() {
        let layout = Histogram::<u64>::new_with_bounds(1, u64::MAX >> 1, SIGNIFICANT_DIGITS).unwrap();
        let mut value = 0u64;
        while value < u64::MAX >> 2 {
            let (low, high) = index_range(counts_index(value));
            assert_eq!((low, high), (layout.lowest_equivalent(value), layout.highest_equivalent(value)), "{value}");
            assert_eq!(counts_index(low), counts_index(value));
            assert_eq!(counts_index(high + 1), counts_index(value) + 1, "the next counter starts after {high}");
            value = value * 3 / 2 + 1;
        }
    }

    #[test]
    fn the_sparse_encoding_is_the_library_s_byte_for_byte() {
        // Values in every region: 0, the counted range, several buckets above it, repeats, and
        // negative ones (stored as 0; their magnitudes apart).
        let mut random = 0x2545_f491_4f6c_dd1du64;
        let mut values: Vec<i64> = (0..20_000)
            .map(|_| {
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                let scale = [10u64, 1_000, 262_144, 300_000, 5_000_000, 3_000_000_000][(random % 6) as usize];
                (random >> 8) as i64 % scale as i64 - i64::from(random % 50 == 0) * 40_000
            })
            .collect();
        values.extend([0, 0, 262_143, 262_144, 1 << 40]);
        let library = |values: &mut dyn Iterator<Item = u64>| {
            let values: Vec<u64> = values.collect();
            let highest = values.iter().copied().max().unwrap_or(0).max(2);
            let mut h = Histogram::<u64>::new_with_bounds(1, highest, SIGNIFICANT_DIGITS).unwrap();
            values.iter().for_each(|v| h.record(*v).unwrap());
            let mut plain = Vec::new();
            V2Serializer::new().serialize(&h, &mut plain).unwrap();
            plain
        };
        let plain = |text: &str| {
            use std::io::Read;
            let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
            let mut plain = Vec::new();
            flate2::read::ZlibDecoder::new(&bytes[8..]).read_to_end(&mut plain).unwrap();
            plain
        };
        for exact in [true, false] {
            let mut h = if exact { SignedHistogram::exact() } else { SignedHistogram::default() };
            values.iter().for_each(|v| h.record(*v));
            // Bucketed values are stored at their bucket's top: the library sees the same.
            let layout = Histogram::<u64>::new(SIGNIFICANT_DIGITS).unwrap();
            let stored = |v: u64| if exact || v < EXACT_BELOW { v } else { layout.highest_equivalent(v) };
            let clamped = library(&mut values.iter().map(|v| stored((*v).max(0) as u64)));
            assert_eq!(plain(&h.encode_clamped()), clamped, "exact: {exact}");
            let magnitudes = library(&mut values.iter().filter(|v| **v < 0).map(|v| stored(v.unsigned_abs())));
            assert_eq!(plain(&h.encode_negatives().unwrap()), magnitudes, "exact: {exact}");
        }
        let empty = library(&mut std::iter::empty());
        assert_eq!(plain(&SignedHistogram::exact().encode_clamped()), empty);
        assert!(SignedHistogram::exact().encode_negatives().is_none());
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
    fn an_absorbed_histogram_is_as_if_its_values_were_recorded_here() {
        let (a, b) = ([300_000, -40, 5, 1_000_000_007, 5], [-1, 262_144, 7, 300_000, 0, -40_000_000]);
        let all: Vec<i64> = a.iter().chain(&b).copied().collect();
        let filled = |values: &[i64], exact: bool| {
            let mut h = if exact { SignedHistogram::exact() } else { SignedHistogram::default() };
            values.iter().for_each(|v| h.record(*v));
            h
        };
        // Both exact; and an exact one absorbing one that is not, which makes it approximate.
        for (a_exact, b_exact) in [(true, true), (true, false), (false, true), (false, false)] {
            let mut merged = filled(&a, a_exact);
            merged.absorb(filled(&b, b_exact));
            let one = filled(&all, a_exact && b_exact);
            assert_eq!(merged.len(), one.len());
            assert_eq!(merged.buckets(), one.buckets(), "{a_exact} {b_exact}");
            assert_eq!(merged.encode_clamped(), one.encode_clamped());
            assert_eq!(merged.encode_negatives(), one.encode_negatives());
        }
    }

    #[test]
    fn cdf_ends_at_one() {
        let h = of(&[1, 2, 2, 3]);
        assert_eq!(cdf(&h), vec![(1, 0.25), (2, 0.75), (3, 1.0)]);
    }
}
