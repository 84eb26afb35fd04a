//! Names a user types (runtimes, receivers, sweep parameters): the one error for a name that is
//! not known, with the nearest known one when it is close enough to be a typo.

/// "unknown runtime 'tokyo-mt' (did you mean 'tokio-mt'? known: thread, tokio-ct, ...)".
pub fn unknown(what: &str, typed: &str, known: &[&str]) -> String {
    let known_list = known.join(", ");
    match nearest(typed, known) {
        Some(near) => format!("unknown {what} '{typed}' (did you mean '{near}'? known: {known_list})"),
        None => format!("unknown {what} '{typed}' (known: {known_list})"),
    }
}

/// The known name most like `typed`, if any is alike enough (Jaro-Winkler similarity 0.8 or
/// more, the measure clap uses for its own suggestions).
pub fn nearest<'a>(typed: &str, known: &[&'a str]) -> Option<&'a str> {
    // Nothing that long is a typo (and comparing it would cost its length times the names').
    if typed.len() > 64 {
        return None;
    }
    let typed = typed.to_lowercase();
    known
        .iter()
        .map(|name| (strsim::jaro_winkler(&typed, &name.to_lowercase()), *name))
        .filter(|(similarity, _)| *similarity >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_the_nearest_name_and_nonsense_gets_none() {
        let known = ["thread", "tokio-ct", "tokio-mt", "smol", "python-asyncio"];
        assert_eq!(nearest("tokyo-mt", &known), Some("tokio-mt"));
        assert_eq!(nearest("Smol", &known), Some("smol"));
        assert_eq!(nearest("pyhton-asyncio", &known), Some("python-asyncio"));
        assert_eq!(nearest("threads", &known), Some("thread"));
        assert_eq!(nearest("xyz", &known), None);
        assert_eq!(nearest(&"tokio-mt".repeat(1000), &known), None);
        assert_eq!(
            unknown("runtime", "tokyo-mt", &known),
            "unknown runtime 'tokyo-mt' (did you mean 'tokio-mt'? known: thread, tokio-ct, tokio-mt, smol, python-asyncio)"
        );
        assert_eq!(unknown("runtime", "xyz", &known[..1]), "unknown runtime 'xyz' (known: thread)");
    }
}
