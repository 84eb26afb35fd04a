//! The pieces of every `report.html` (`page.rs` assembles them): one self-contained file (inline
//! CSS and SVG, nothing fetched): the style, the head with the command line, tables, figures.

use crate::report::tables::Table;
use std::fmt::Write as _;
use taskmeter_model::header::Header;

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; background: #fff; line-height: 1.4; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
pre { background: #f5f5f5; padding: .6rem; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; margin: .6rem 0; font-variant-numeric: tabular-nums; }
th, td { padding: .25rem .7rem; border-bottom: 1px solid #e5e5e5; text-align: right; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
th:first-child, td:first-child { text-align: left; }
th { background: #fafafa; }
.status { display: inline-block; padding: .1rem .5rem; border-radius: .3rem; font-size: .9rem; }
.complete { background: #e3f4e3; color: #165016; } .incomplete, .failure { background: #fde8e8; color: #8a1515; }
.failure { padding: .4rem .7rem; margin: .3rem 0; border-left: 4px solid #c62828; }
.warnings { background: #fff8e1; border-left: 4px solid #f9a825; padding: .2rem 1rem; } .warnings h2 { margin-top: .5rem; border: 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1.2rem; } dt { font-weight: 600; } dd { margin: 0; }
figure.chart { display: inline-block; vertical-align: top; max-width: 100%; }
figure.chart { margin: 1rem 0; } figure.chart svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9rem; color: #555; }
.env td { text-align: left; }
";

/// A command line as a shell would take it back: words with spaces or quotes are quoted.
pub fn shell_words(words: &[String]) -> String {
    let quote = |w: &String| {
        let plain = !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
        if plain {
            w.clone()
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A self-contained page in the reports' style: `body` is HTML, the title is text.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{STYLE}</style></head><body>\n<h1>{0}</h1>\n{body}</body></html>\n",
        escape(title)
    )
}

pub(super) fn html_table(out: &mut String, t: &Table, class: &str) {
    let _ = write!(out, "<div class=\"scroll\"><table class=\"{class}\"><thead><tr>");
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for line in &t.lines {
        out.push_str("<tr>");
        for cell in line {
            let _ = write!(out, "<td>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    for (runtime, reason) in &t.without_statistics {
        let _ = writeln!(
            out,
            "<tr class=\"failure\"><td>{}</td><td colspan=\"{}\">{}</td></tr>",
            escape(runtime),
            t.header.len() - 1,
            escape(reason)
        );
    }
    out.push_str("</tbody></table></div>\n");
}

/// The document's start: title, status, when, and the command line.
pub(super) fn page_head(title: &str, header: &Header, when: &str) -> String {
    let command_line = &header.command_line;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(title)
    );
    let (class, status) = match header.complete {
        true => ("complete", "complete".to_string()),
        false => {
            ("incomplete", format!("INCOMPLETE: {}", header.incomplete_reason.as_deref().unwrap_or("interrupted")))
        }
    };
    let _ = writeln!(
        out,
        "<h1>{}</h1><p><span class=\"status {class}\">{}</span> {}</p>",
        escape(title),
        escape(&status),
        escape(when)
    );
    let _ = writeln!(out, "<pre class=\"command\">{}</pre>", escape(&shell_words(command_line)));
    out
}
