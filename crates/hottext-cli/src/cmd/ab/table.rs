//! `hottext ab`'s report for a person: its table, and its exit status.

use std::io::Write;
use std::process::ExitCode;

use hottext::measure::ab::Report;

use crate::output::{self, with_unit, Comparison, ComparisonColumns, Mode};

/// The stream of `ab`'s report (`ab::STREAMS`).
pub(super) const STREAM: output::Stream = <Report as output::Report>::STREAM;

impl output::Report for Report {
    /// The report as a table: a row a metric, its medians, B/A and verdict, then the notes.
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let r = self;
        writeln!(out, "A  {}", r.a)?;
        writeln!(out, "B  {}", r.b)?;
        let place = match r.cpu {
            Some(cpu) => {
                format!("; server pinned to CPU {cpu}, counted with perf stat -a -C {cpu}")
            }
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
        let columns = ComparisonColumns {
            label: "metric",
            label_width: 28,
            a: "median A",
            b: "median B",
            range: "95 % interval",
        };
        let rows = r.rows.iter().map(|row| Comparison {
            label: with_unit(&row.label, &row.unit),
            a: row.comparison.median_a,
            b: row.comparison.median_b,
            ratio: row.comparison.ratio.map(|x| (x.median, x.low, x.high)),
            verdict: row.comparison.verdict.describe(),
        });
        output::comparison_table(out, &columns, rows)?;
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

    /// The warnings on stderr; exit status 1 when --expect-same found different outputs.
    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        for w in &self.warnings {
            output::warn(w);
        }
        Ok(super::expect_same_status(
            self.outputs_differ(),
            &self.same_outputs,
        ))
    }
}
