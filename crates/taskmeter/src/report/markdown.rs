//! The tables of a run as Markdown, ready to paste into an issue or a paper.

use super::tables::*;
use taskmeter_model::run::RunRecord;

/// The tables as Markdown, one per point, ready to paste into an issue or a paper.
pub fn markdown(record: &RunRecord) -> String {
    let mut out = format!("**taskmeter** {}\n\n", settings_line(record));
    if default_layout(record) == Layout::Volume {
        let t = volume_table_of(record);
        markdown_table(&mut out, &t);
        for line in memory_lines(record)
            .iter()
            .filter(|_| record.sweeps.iter().any(|s| s.param == taskmeter_model::sweep::Param::Units))
        {
            out.push_str(&format!("- memory per unit, {line}\n"));
        }
        out.push_str(&format!("\n_{}_\n", explain_volume(record)));
        return out;
    }
    for point in &record.points {
        if record.points.len() > 1 {
            out.push_str(&format!("**point {}: {}**\n\n", point.index, point.label()));
        }
        markdown_table(&mut out, &table_of(record, point.index));
    }
    out.push_str(&format!("_{}_\n", explain(record)));
    out
}

fn markdown_table(out: &mut String, t: &Table) {
    let columns = t.header.len();
    out.push_str(&format!("| {} |\n|:---|{}\n", t.header.join(" | "), "---:|".repeat(columns - 1)));
    for line in &t.lines {
        out.push_str(&format!("| {} |\n", line.join(" | ")));
    }
    for (runtime, reason) in &t.without_statistics {
        out.push_str(&format!("| {runtime} | {} |{}\n", reason.replace('|', "\\|"), " |".repeat(columns - 2)));
    }
    out.push('\n');
}

/// A table as Markdown: the first line is the header, the first column left-aligned and the
/// others right-aligned.
pub fn table(lines: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|:---|{}\n", lines[0].join(" | "), "---:|".repeat(lines[0].len() - 1));
    for line in &lines[1..] {
        out.push_str(&format!("| {} |\n", line.join(" | ")));
    }
    out
}
