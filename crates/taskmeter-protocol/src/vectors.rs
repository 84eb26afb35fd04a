//! The protocol's vectors (protocol/vectors), compiled in so an installed taskmeter can check a
//! driver: valid plans every worker runs, and invalid ones every worker refuses. The literal
//! `RUNTIME` stands for the runtime under test.

macro_rules! vectors {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../protocol/vectors/", $dir, "/", $name, ".json")))),*]
    };
}

pub const PLANS: &[(&str, &str)] = vectors!("plans":
    "relative-fixed", "absolute-busy-yield", "absolute-overrun", "by-unit", "modulo-absolute",
    "priority-classes", "atomic-sum-sleep", "atomic-sum-yield", "sleep-yield");

pub const INVALID_PLANS: &[(&str, &str)] = vectors!("invalid-plans":
    "not-json", "protocol-1", "protocol-3", "zero-units", "unknown-mode", "unknown-schedule", "missing-busy",
    "unknown-experiment", "modulo-zero", "negative-duration", "unknown-runtime", "absolute-zero-period",
    "three-classes", "zero-start-limit", "missing-start-limit");
