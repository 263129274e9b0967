//! `hottext ab`'s table.

use std::io::Write;

use hottext::measure::ab::Report;

use crate::cmd::stat::{number, with_unit};

/// The report as a table on stdout: a row a metric, its medians, B/A and verdict, then the
/// warnings and notes.
pub(super) fn print_report(r: &Report) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "A  {}", r.a)?;
    writeln!(out, "B  {}", r.b)?;
    let place = match r.cpu {
        Some(cpu) => format!("; server pinned to CPU {cpu}, counted with perf stat -a -C {cpu}"),
        None => String::new(),
    };
    writeln!(
        out,
        "{} rounds (A B, B A, ...) after {} warm-up{place}",
        r.runs, r.warmup
    )?;
    writeln!(
        out,
        "B/A: the median of the per-round ratios, so it can be below 1 while B's median is higher\n\
         (and the other way round); 95 % interval: ratios ranked {} and {} of {} ({:.1} % coverage)\n",
        r.interval_ranks.0,
        r.interval_ranks.1,
        r.runs,
        100.0 * r.interval_coverage
    )?;
    writeln!(
        out,
        "{:<28} {:>14} {:>14} {:>8}  {:<18} verdict",
        "metric", "median A", "median B", "B/A", "95 % interval"
    )?;
    for row in &r.rows {
        let c = &row.comparison;
        let (ratio, interval) = match c.ratio {
            Some(x) => (
                format!("{:.3}", x.median),
                format!("[{:.3}, {:.3}]", x.low, x.high),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        writeln!(
            out,
            "{:<28} {:>14} {:>14} {:>8}  {:<18} {}",
            with_unit(&row.label, &row.unit),
            number(c.median_a),
            number(c.median_b),
            ratio,
            interval,
            c.verdict.describe()
        )?;
    }
    if let Some(row) = r.headline.as_deref().and_then(|k| r.row(k)) {
        let interval = row.comparison.ratio.map_or(String::new(), |x| {
            format!(
                " (B/A {:.3}, 95 % interval [{:.3}, {:.3}])",
                x.median, x.low, x.high
            )
        });
        writeln!(
            out,
            "\nverdict by {}: {}{interval}",
            with_unit(&row.label, &row.unit),
            row.comparison.verdict.describe()
        )?;
    }
    if !r.same_outputs.is_empty() && !r.outputs_differ() {
        if let Some(text) = r.same_outputs.keys().next() {
            writeln!(out, "every run printed the same --expect-same text: {text}")?;
        }
    }
    for note in &r.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}
