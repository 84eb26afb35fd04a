//! The distribution of a row's samples, kept in `run.json` so charts and `compare` can be
//! rebuilt from it alone: an HdrHistogram with 5 significant digits (exact below 262 µs,
//! within 0.001 % above), serialised in the V2 format with deflate, then base64.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use std::io::Write;
use hdrhistogram::Histogram;

pub const SIGNIFICANT_DIGITS: u8 = 5;

/// Records the values; negative ones (a wake-up before its deadline) are recorded as 0 and
/// counted by the caller, since the histogram holds only values >= 0.
pub fn of(values: &[i64]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(SIGNIFICANT_DIGITS).expect("5 significant digits are valid");
    for v in values {
        h.record((*v).max(0) as u64).expect("an auto-resizing histogram takes any value");
    }
    h
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
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("a histogram cannot be read: {e:?}"))
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
    fn cdf_ends_at_one() {
        let h = of(&[1, 2, 2, 3]);
        assert_eq!(cdf(&h), vec![(1, 0.25), (2, 0.75), (3, 1.0)]);
    }
}
