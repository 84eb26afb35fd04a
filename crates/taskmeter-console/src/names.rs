//! Names a user types (runtimes, receivers, sweep parameters): the one error for a name that is
//! not known, with the nearest known one when it is close enough to be a typo.

/// Up to this many known names, an error lists them all; with more (the runtimes), it lists the
/// [`CANDIDATES`] most like the name typed and says where to see them all, so that the error
/// stays one readable line (about 200 characters).
const LISTED_IN_FULL: usize = 10;
const CANDIDATES: usize = 4;

/// "unknown runtime 'tokyo-mt' (did you mean 'tokio-mt'? known: thread, tokio-ct, ...)"; with
/// more than [`LISTED_IN_FULL`] names, "unknown runtime 'tokyo-mt' (did you mean 'tokio-mt'?
/// also alike: tokio-ct, ...; all 62 in `taskmeter list`)".
pub fn unknown(what: &str, typed: &str, known: &[&str]) -> String {
    unknown_listed(what, typed, known, "`taskmeter list`")
}

/// [`unknown`], saying that `listed_in` lists them all when they are too many for the line.
/// Variants of a name listed (`tokio-mt+fifo`, `go/ticker`, `go@1.22`) are not listed again,
/// and for a plain name typed, plain names come before variants.
pub fn unknown_listed(what: &str, typed: &str, known: &[&str], listed_in: &str) -> String {
    let near = nearest(typed, known);
    if known.len() <= LISTED_IN_FULL {
        let known_list = known.join(", ");
        return match near {
            Some(near) => format!("unknown {what} '{typed}' (did you mean '{near}'? known: {known_list})"),
            None => format!("unknown {what} '{typed}' (known: {known_list})"),
        };
    }
    let base = |name: &str| name.split(['+', '/', '@']).next().unwrap_or(name).to_string();
    let mut bases: Vec<String> = near.map(base).into_iter().collect();
    let mut alike = Vec::new();
    let wanted = if near.is_some() { CANDIDATES - 1 } else { CANDIDATES };
    // A plain name typed is offered plain names first, then the variants of others.
    let variant_typed = typed.len() <= 64 && typed.contains(['+', '/', '@']);
    let plain = |name: &&str| variant_typed || base(name) == *name;
    let (first, then): (Vec<&str>, Vec<&str>) = most_alike(typed, known).into_iter().partition(plain);
    for name in first.into_iter().chain(then) {
        if alike.len() >= wanted {
            break;
        }
        if Some(name) != near && !bases.contains(&base(name)) {
            bases.push(base(name));
            alike.push(name);
        }
    }
    let all = format!("all {} in {listed_in}", known.len());
    match near {
        Some(near) => {
            format!("unknown {what} '{typed}' (did you mean '{near}'? also alike: {}; {all})", alike.join(", "))
        }
        None => format!("unknown {what} '{typed}' (the most alike: {}; {all})", alike.join(", ")),
    }
}

/// The known names, most like `typed` first: the fewest edits for their length (Damerau-
/// Levenshtein), then the most alike by Jaro-Winkler, then in their own order.
fn most_alike<'a>(typed: &str, known: &[&'a str]) -> Vec<&'a str> {
    // Nothing that long is like a name (and the edit distance would take its length times the
    // names' in memory): the names in their own order.
    if typed.len() > 64 {
        return known.to_vec();
    }
    let typed = typed.to_lowercase();
    let mut scored: Vec<(f64, f64, &str)> = known
        .iter()
        .map(|name| {
            let name_lower = name.to_lowercase();
            let edits = strsim::normalized_damerau_levenshtein(&typed, &name_lower);
            (edits, strsim::jaro_winkler(&typed, &name_lower), *name)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)));
    scored.into_iter().map(|(.., name)| name).collect()
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

    #[test]
    fn among_many_names_a_few_alike_are_listed_and_where_to_see_all() {
        let known = [
            "thread",
            "tokio-ct",
            "tokio-mt",
            "smol",
            "embassy",
            "c-thread",
            "go",
            "go-locked",
            "node",
            "node-worker",
            "java-thread",
            "java-virtual",
            "python-thread",
            "python-asyncio",
            "tokio-mt+fifo",
            "tokio-ct+fifo",
        ];
        assert_eq!(
            unknown("runtime", "tokyo-mt", &known),
            "unknown runtime 'tokyo-mt' (did you mean 'tokio-mt'? also alike: tokio-ct, go-locked, python-asyncio; \
             all 16 in `taskmeter list`)"
        );
        // tokio-mt+fifo and tokio-ct+fifo are as alike, but variants of names already listed.
        let nonsense = unknown("runtime", "qqq", &known);
        assert!(nonsense.starts_with("unknown runtime 'qqq' (the most alike: "), "{nonsense}");
        assert!(nonsense.ends_with("; all 16 in `taskmeter list`)"), "{nonsense}");
        assert_eq!(nonsense.matches(", ").count(), 3, "four names: {nonsense}");
        // A long name typed stays within the error's 200 characters (the caller shortens what
        // was typed: `cli::shorten`).
        let typed = "x".repeat(64);
        assert!(unknown("runtime", &typed, &known).chars().count() < 200 + 64);
        // A huge value is not compared (the caller shortens it in the error line).
        let huge = "x".repeat(1 << 20);
        assert!(unknown("runtime", &huge, &known).contains("(the most alike: thread, tokio-ct, tokio-mt, smol;"));
    }
}
