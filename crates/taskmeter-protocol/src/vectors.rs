//! The protocol's vectors (protocol/vectors), compiled in so an installed taskmeter can check a
//! driver: valid plans every worker runs (the literal `RUNTIME` stands for the runtime under
//! test), invalid plans the orchestrator's validator refuses, and example frame streams with
//! their verdicts.

macro_rules! vectors {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../protocol/vectors/", $dir, "/", $name, ".json")))),*]
    };
}

pub const PLANS: &[(&str, &str)] = vectors!("plans":
    "relative-fixed", "absolute-busy-yield", "absolute-overrun", "by-unit", "modulo-absolute",
    "priority-classes", "atomic-sum-sleep", "atomic-sum-yield", "sleep-yield", "full-rings", "granularity-trivial", "granularity-chain",
    "granularity-stencil");

pub const INVALID_PLANS: &[(&str, &str)] = vectors!("invalid-plans":
    "not-json", "protocol-3", "protocol-4", "protocol-5", "protocol-7", "zero-units", "unknown-mode", "unknown-schedule",
    "unknown-experiment", "missing-busy-iters", "missing-start-limit", "modulo-zero", "negative-duration",
    "absolute-zero-period", "absolute-sub-microsecond", "three-classes", "zero-start-limit", "zero-ring",
    "short-flush", "unknown-key", "repeated-key", "float-integer", "above-2-pow-53", "overflowing-end",
    "string-boolean", "empty-runtime", "none-with-sleep", "fixed-with-modulo", "granularity-rising-grains",
    "granularity-two-units", "granularity-missing-pattern", "granularity-zero-width", "granularity-short-calibration",
    "grain-keys-in-sleep", "granularity-unknown-pattern", "granularity-hex-grain", "room-above-2-pow-53",
    "missing-max-map-count", "quoted-why", "wait-bad-name", "wait-with-none");

pub const STREAMS: &[(&str, &str)] = vectors!("streams": "relative", "absolute", "atomic-partial", "lost", "flushed", "killed", "refused", "granularity");

/// The bytes of a stream vector's `frames`: `[kind, payload]` pairs, the `S` and `F` payloads
/// written as `{"unit", "origin", "first", "samples": [[start, busy_end, intended, wake], ...]}`
/// and the binary `U` payload as `{"unit", "origin_ns", "iterations", "measured_iterations",
/// "lost"}`.
/// One stream, as the orchestrator reads it: the sample file's frames in their place among
/// stdout's.
pub fn encode_stream(frames: &serde_json::Value) -> Vec<u8> {
    let mut bytes = Vec::new();
    for frame in frames.as_array().expect("frames are an array") {
        let kind = frame[0].as_str().expect("a kind").as_bytes()[0];
        let payload = &frame[1];
        if kind == crate::frames::kind::SAMPLES || kind == crate::frames::kind::FLUSHED {
            let word = |v: &serde_json::Value| v.as_u64().expect("an integer");
            // The period is the wire's to leave out (it is derived): any will do.
            let samples: Vec<crate::frames::Sample> = payload["samples"]
                .as_array()
                .expect("samples")
                .iter()
                .map(|s| {
                    let w: Vec<u64> = s.as_array().expect("four integers").iter().map(word).collect();
                    crate::frames::Sample::from_wire_words(0, w.try_into().expect("four integers"))
                })
                .collect();
            let head = crate::frames::ChunkHead {
                unit: word(&payload["unit"]) as u32,
                origin_ns: word(&payload["origin"]),
                first: word(&payload["first"]),
                by_unit: kind == crate::frames::kind::FLUSHED,
            };
            crate::frames::put_samples(&mut bytes, head, samples.into_iter());
        } else if kind == crate::frames::kind::UNIT {
            let end: crate::frames::UnitEnd = serde_json::from_value(payload.clone()).expect("a unit's five numbers");
            crate::frames::put_unit(&mut bytes, &end);
        } else {
            crate::frames::put_json(&mut bytes, kind, payload);
        }
    }
    bytes
}
