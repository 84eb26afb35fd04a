//! How wide the terminal is, and text made to fit it: what taskmeter writes as text for a reader
//! (the console report, `list`, `history`, `compare`, errors, the live line) wraps prose at word
//! boundaries with a hanging indent, and tables shrink or leave out columns before they overflow.
//! JSON, CSV and the files of a results folder are never fitted.
//!
//! The width is `COLUMNS` when it is set to a number (as `ls`, `git` and clap read it), else the
//! stream's terminal, else 100 columns. A width is counted in Unicode scalar values, ANSI colour
//! codes left out.

use std::os::fd::AsRawFd;

/// The width when the stream is no terminal and `COLUMNS` is not set.
pub const DEFAULT_WIDTH: usize = 100;
/// No width is taken below this: a narrower `COLUMNS` is read as this.
pub const NARROWEST: usize = 20;

/// The width of what goes to standard output.
pub fn width() -> usize {
    width_of(std::io::stdout().as_raw_fd())
}

/// The width of what goes to standard error.
pub fn stderr_width() -> usize {
    width_of(std::io::stderr().as_raw_fd())
}

fn width_of(fd: i32) -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|v| v.trim().parse::<usize>().ok()).filter(|n| *n > 0);
    columns.or_else(|| terminal_width(fd)).unwrap_or(DEFAULT_WIDTH).max(NARROWEST)
}

/// The columns of the terminal at `fd`, None when it is no terminal.
fn terminal_width(fd: i32) -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes one winsize into the struct it is given, and nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col as usize)
}

/// How many columns `text` takes: its Unicode scalar values, less ANSI escape sequences.
pub fn columns(text: &str) -> usize {
    let mut count = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then one final byte in @..~.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        count += 1;
    }
    count
}

/// One line of prose as lines of at most `width` columns, broken between words: the first line
/// keeps the text's own leading spaces, the lines after it start with `indent` (a hanging
/// indent). A word is never cut: one longer than a line breaks only after a comma if it holds
/// one (a list), else stands alone on its line, the only case where a line is wider than
/// `width`. A word of punctuation alone (`|`, `-`, `->`, `=`) stays
/// with the word before it, so that no line starts with one, and so does a unit with its number
/// ("180 µs"). Spaces where the text breaks are dropped.
pub fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let indent = if columns(indent) * 2 > width { "  " } else { indent };
    let body = text.trim_start_matches(' ');
    // The words, each with the spaces before it.
    let mut words: Vec<(&str, String)> = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let gap_len = rest.len() - rest.trim_start_matches(' ').len();
        let (gap, after) = rest.split_at(gap_len);
        let word_len = after.find(' ').unwrap_or(after.len());
        let (word, after) = after.split_at(word_len);
        rest = after;
        let punctuation = !word.is_empty() && !word.chars().any(char::is_alphanumeric);
        match words.last_mut() {
            // Trailing spaces.
            _ if word.is_empty() => break,
            Some((_, before)) if punctuation || (before.ends_with(|c: char| c.is_ascii_digit()) && is_unit(word)) => {
                before.push_str(gap);
                before.push_str(word);
            }
            _ => words.push((gap, word.to_string())),
        }
    }
    // A word longer than a line that is a list ("thread,smol,go,...") may break after a comma.
    let room = width.saturating_sub(columns(indent));
    let words: Vec<(&str, String)> = words
        .into_iter()
        .flat_map(|(gap, word)| {
            let pieces: Vec<String> = match columns(&word) > room && word.contains(',') {
                true => word.split_inclusive(',').map(str::to_string).collect(),
                false => vec![word],
            };
            pieces.into_iter().enumerate().map(move |(i, piece)| (if i == 0 { gap } else { "" }, piece))
        })
        .collect();
    let mut line = text[..text.len() - body.len()].to_string();
    let mut used = columns(&line);
    let mut lines = Vec::new();
    for (i, (gap, word)) in words.iter().enumerate() {
        let needed = columns(word);
        if i > 0 && used + columns(gap) + needed > width {
            lines.push(std::mem::take(&mut line));
            line.push_str(indent);
            used = columns(indent);
        } else {
            line.push_str(gap);
            used += columns(gap);
        }
        line.push_str(word);
        used += needed;
    }
    lines.push(line);
    lines
}

/// Whether `word` is a unit a number is written with ("µs", "ms,", "%)"), which stays with it.
fn is_unit(word: &str) -> bool {
    const UNITS: [&str; 17] =
        ["ns", "µs", "us", "ms", "s", "%", "B", "KiB", "MiB", "GiB", "k/s", "M/s", "/s", "msg/s", "x", "kB", "MB"];
    UNITS.contains(&word.trim_end_matches([',', ';', ':', ')', '.']))
}

/// `text` with every line wider than `width` wrapped ([`wrap`]), each line's continuation
/// indented two columns more than the line itself. Lines that fit are left as they are.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        if columns(body) <= width {
            out.push_str(line);
            continue;
        }
        let lead = body.len() - body.trim_start_matches(' ').len();
        let indent = format!("{}  ", &body[..lead]);
        out.push_str(&wrap(body, width, &indent).join("\n"));
        out.push_str(newline);
    }
    out
}

/// `text` cut to `width` columns, ending in "…" when cut.
pub fn truncate(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// A comma-separated list in at most `width` columns: as many of its first items as fit, and
/// how many are left ("thread,tokio-ct,+13"); cut with "…" when not even one item fits.
pub fn abbreviate_list(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_string();
    }
    let items: Vec<&str> = text.split(',').collect();
    for kept in (1..items.len()).rev() {
        let short = format!("{},+{}", items[..kept].join(","), items.len() - kept);
        if columns(&short) <= width {
            return short;
        }
    }
    truncate(text, width)
}

/// How a table column may be narrowed before columns are left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shrink {
    /// Cut, ending in "…" ([`truncate`]).
    Ellipsis,
    /// A comma-separated list: its first items and a count ([`abbreviate_list`]).
    List,
}

/// How a table fits a width: the columns that may be narrowed (by header, down to at least
/// `min` columns and never below the header), and the order columns are left out in when
/// narrowing is not enough (by header, a name given twice meaning its second column; the
/// columns not named follow, from the right). The first column is never left out.
#[derive(Clone, Debug, Default)]
pub struct Fit<'a> {
    pub shrink: Vec<(&'a str, Shrink, usize)>,
    pub drop: Vec<&'a str>,
}

/// A table made to fit.
#[derive(Clone, Debug, PartialEq)]
pub struct Fitted {
    /// The header, then the lines, of the columns kept, their cells narrowed where needed.
    pub lines: Vec<Vec<String>>,
    /// Which of the columns in `lines` the table had: their indexes in the table as given.
    pub kept: Vec<usize>,
    /// The headers of the columns left out, in the table's order.
    pub left_out: Vec<String>,
    /// The width the whole table would take.
    pub natural: usize,
}

/// The width a table's columns take, two spaces between them.
fn table_width(widths: &[usize]) -> usize {
    widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1)
}

/// `lines` (a header, then the lines) fitted into `width` columns with two spaces between
/// columns: the columns of `fit.shrink` narrowed first, then columns left out in `fit.drop`'s
/// order until the rest fits (narrowed columns take back what a left-out column frees).
pub fn fit_table(lines: &[Vec<String>], width: usize, fit: &Fit) -> Fitted {
    let Some(header) = lines.first() else {
        return Fitted { lines: Vec::new(), kept: Vec::new(), left_out: Vec::new(), natural: 0 };
    };
    let n = header.len();
    let natural_of = |c: usize| lines.iter().map(|l| l.get(c).map_or(0, |s| columns(s))).max().unwrap_or(0);
    let natural: Vec<usize> = (0..n).map(natural_of).collect();
    let position = |name: &str| header.iter().position(|h| h == name);
    // A header named twice in `drop` is its second column of that name.
    let mut order: Vec<usize> = Vec::new();
    for name in &fit.drop {
        if let Some(c) = (1..n).find(|c| header[*c] == *name && !order.contains(c)) {
            order.push(c);
        }
    }
    let unnamed: Vec<usize> = (1..n).rev().filter(|c| !order.contains(c)).collect();
    order.extend(unnamed);
    let shrinkable: Vec<(usize, Shrink, usize)> = fit
        .shrink
        .iter()
        .filter_map(|(name, how, min)| {
            let c = position(name)?;
            Some((c, *how, (*min).max(columns(&header[c])).min(natural[c])))
        })
        .collect();
    let mut kept: Vec<usize> = (0..n).collect();
    let mut order = order.into_iter();
    let targets = loop {
        let mut widths: Vec<usize> = kept.iter().map(|c| natural[*c]).collect();
        let mut excess = table_width(&widths).saturating_sub(width);
        for (c, _, min) in &shrinkable {
            let Some(k) = kept.iter().position(|x| x == c) else { continue };
            let saved = excess.min(widths[k] - min);
            widths[k] -= saved;
            excess -= saved;
        }
        if excess == 0 {
            break widths;
        }
        match order.next() {
            Some(c) => kept.retain(|x| *x != c),
            None => break widths,
        }
    };
    let shrink_of = |c: usize| shrinkable.iter().find(|(s, ..)| *s == c).map(|(_, how, _)| *how);
    let fitted = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            kept.iter()
                .zip(&targets)
                .map(|(c, target)| {
                    let cell = line.get(*c).map_or("", String::as_str);
                    match shrink_of(*c) {
                        Some(_) if i == 0 => cell.to_string(),
                        Some(Shrink::Ellipsis) => truncate(cell, *target),
                        Some(Shrink::List) => abbreviate_list(cell, *target),
                        None => cell.to_string(),
                    }
                })
                .collect()
        })
        .collect();
    let left_out = (0..n).filter(|c| !kept.contains(c)).map(|c| header[c].clone()).collect();
    Fitted { lines: fitted, kept, left_out, natural: table_width(&natural) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widest(lines: &[String]) -> usize {
        lines.iter().map(|l| columns(l)).max().unwrap_or(0)
    }

    #[test]
    fn columns_count_scalar_values_without_colour_codes() {
        assert_eq!(columns("p99 250 µs"), 10);
        assert_eq!(columns("\u{1b}[1mruntime\u{1b}[0m"), 7);
        assert_eq!(columns("\u{1b}[31;1mx\u{1b}[0m y"), 3);
        assert_eq!(columns(""), 0);
    }

    #[test]
    fn prose_wraps_between_words_with_a_hanging_indent() {
        let text = "env: Linux 6.1 | AMD EPYC | 2 cores | clocksource tsc | workers SCHED_OTHER prio 0 nice 0";
        let lines = wrap(text, 30, "  ");
        assert_eq!(
            lines,
            [
                "env: Linux 6.1 | AMD EPYC | 2",
                "  cores | clocksource tsc |",
                "  workers SCHED_OTHER prio 0",
                "  nice 0"
            ]
        );
        // A separator stays at the end of a line, never at the start of the next.
        assert_eq!(wrap("env: Linux 6.1 | AMD EPYC", 16, "  "), ["env: Linux 6.1 |", "  AMD EPYC"]);
        assert_eq!(wrap("lateness = wake-up - intended", 20, "  "), ["lateness = wake-up -", "  intended"]);
        assert_eq!(wrap("load 1.47 -> 1.47", 12, "  "), ["load 1.47 ->", "  1.47"]);
        // A value is never parted from its unit.
        assert_eq!(wrap("python-thread 180 µs, go 862 ns", 18, "  "), ["python-thread", "  180 µs, go", "  862 ns"]);
        assert!(widest(&lines) <= 30);
        // Joined again at the breaks, the text is whole: no word was cut.
        let joined = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        assert_eq!(joined, text);
    }

    #[test]
    fn a_line_that_fits_is_left_as_it_is_and_its_inner_spaces_kept() {
        assert_eq!(wrap("a  b   c", 80, "  "), ["a  b   c"]);
        assert_eq!(wrap("  indented text", 80, "    "), ["  indented text"]);
        assert_eq!(wrap("", 80, "  "), [""]);
        assert_eq!(wrap("trailing   ", 80, "  "), ["trailing"]);
    }

    #[test]
    fn a_word_longer_than_the_line_stands_alone_uncut() {
        let path = "/a/very/long/path/that/cannot/be/broken/anywhere.json";
        assert_eq!(
            wrap(&format!("results: {path} (report)"), 20, "  "),
            ["results:", &format!("  {path}"), "  (report)"]
        );
        // A list longer than a line breaks after its commas.
        let list = "--runtimes thread,smol,tokio-ct,tokio-mt,embassy -o x";
        assert_eq!(wrap(list, 24, "  "), ["--runtimes thread,smol,", "  tokio-ct,tokio-mt,", "  embassy -o x"]);
    }

    #[test]
    fn an_indent_wider_than_half_the_line_becomes_two_spaces() {
        let lines = wrap("one two three four five six", 12, "          ");
        assert_eq!(lines, ["one two", "  three four", "  five six"]);
    }

    #[test]
    fn fit_wraps_only_the_lines_too_wide_and_keeps_their_indent() {
        let text = "short\n    a long indented line of several words\nlast line without newline";
        let fitted = fit(text, 20);
        assert_eq!(
            fitted,
            "short\n    a long indented\n      line of\n      several words\nlast line without\n  newline"
        );
        assert_eq!(fit("fits\n", 20), "fits\n");
    }

    #[test]
    fn colour_codes_do_not_count_toward_the_width() {
        let red = "\u{1b}[31mtaskmeter: an error\u{1b}[0m";
        assert_eq!(fit(red, 19), red);
        assert_eq!(wrap(red, 12, "  ").len(), 2);
    }

    #[test]
    fn truncation_and_abbreviation_say_what_is_left_out() {
        assert_eq!(truncate("a rather long label", 10), "a rather…");
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(columns(&truncate("a rather long label", 10)), 9);
        let runtimes = "thread,tokio-ct,tokio-mt,smol,go,node";
        assert_eq!(abbreviate_list(runtimes, 40), runtimes);
        assert_eq!(abbreviate_list(runtimes, 20), "thread,tokio-ct,+4");
        assert_eq!(abbreviate_list(runtimes, 10), "thread,+5");
        assert_eq!(abbreviate_list(runtimes, 6), "threa…");
    }

    fn table() -> Vec<Vec<String>> {
        [
            ["id", "label", "runtimes", "complete"],
            ["1", "", "smol,thread", "yes"],
            ["2", "a rather long label for a run", "thread,tokio-ct,tokio-mt,smol,go,node,java-thread", "no"],
        ]
        .iter()
        .map(|l| l.iter().map(|s| s.to_string()).collect())
        .collect()
    }

    #[test]
    fn a_table_that_fits_is_left_whole() {
        let fitted = fit_table(&table(), 200, &Fit::default());
        assert_eq!(fitted.lines, table());
        assert!(fitted.left_out.is_empty());
        assert_eq!(fitted.natural, 2 + 2 + 29 + 2 + 49 + 2 + 8);
    }

    #[test]
    fn a_table_narrows_its_shrinkable_columns_first_then_leaves_columns_out() {
        let fit = Fit {
            shrink: vec![("runtimes", Shrink::List, 10), ("label", Shrink::Ellipsis, 12)],
            drop: vec!["runtimes"],
        };
        // Room for everything once the runtimes are abbreviated.
        let wide = fit_table(&table(), 70, &fit);
        assert_eq!(wide.lines[2][2], "thread,tokio-ct,+5");
        assert_eq!(wide.lines[2][1], "a rather long label for a run");
        // Narrower: the label is cut too.
        let narrow = fit_table(&table(), 40, &fit);
        assert_eq!(narrow.lines[0], ["id", "label", "runtimes", "complete"]);
        assert_eq!(narrow.lines[2], ["2", "a rather long…", "thread,+6", "no"]);
        assert!(narrow.left_out.is_empty());
        // Narrower still: the runtimes go, and the label takes back their room.
        let narrowest = fit_table(&table(), 30, &fit);
        assert_eq!(narrowest.left_out, ["runtimes"]);
        assert_eq!(narrowest.kept, [0, 1, 3]);
        assert_eq!(narrowest.lines[2], ["2", "a rather long l…", "no"]);
        for fitted in [&wide, &narrow, &narrowest] {
            for line in &fitted.lines {
                let widths: Vec<usize> = line.iter().map(|c| columns(c)).collect();
                assert!(table_width(&widths) <= 70);
            }
        }
    }

    #[test]
    fn columns_not_named_are_left_out_from_the_right_and_the_first_never() {
        let fitted = fit_table(&table(), 35, &Fit::default());
        assert_eq!(fitted.kept, [0, 1]);
        assert_eq!(fitted.left_out, ["runtimes", "complete"]);
        let none = fit_table(&table(), 1, &Fit::default());
        assert_eq!(none.kept, [0], "the first column stays, whatever the width");
    }
}
