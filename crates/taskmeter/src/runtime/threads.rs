//! `thread`: one OS thread per unit.

/// Runs `units` units, each `make(unit)` on its own thread, and returns their results in order.
pub fn run<Out, Body>(units: u32, make: impl Fn(u32) -> Body) -> Result<Vec<Out>, String>
where
    Out: Send + 'static,
    Body: FnOnce() -> Out + Send + 'static,
{
    let mut handles = Vec::with_capacity(units as usize);
    for unit in 1..=units {
        let handle = std::thread::Builder::new()
            .name(format!("unit-{unit}"))
            .spawn(make(unit))
            .map_err(|e| format!("could not spawn the thread of unit {unit}: {e}"))?;
        handles.push(handle);
    }
    handles.into_iter().map(|h| h.join().map_err(|_| "a unit thread panicked".to_string())).collect()
}
