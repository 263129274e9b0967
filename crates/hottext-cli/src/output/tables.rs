//! Figures and tables for people: numbers with thousands separators, sizes in KiB and MiB,
//! labels with their unit, and the A/B comparison table that `ab` and `ab --simulate` share.

use std::io::Write;

/// Bytes as a short human figure (KiB, MiB).
pub fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// "label (unit)", or "label /k instr" for a per-instruction rate.
pub fn with_unit(label: &str, unit: &str) -> String {
    match unit {
        "" => label.to_string(),
        u if u.starts_with('/') => format!("{label} {u}"),
        u => format!("{label} ({u})"),
    }
}

/// A figure for people: big counts with thousands separators, small ones with up to 3–4
/// decimals and no trailing zeros (the median of two counts, 29.5, is not "29.500").
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e4 {
        let digits = format!("{:.0}", a);
        let mut grouped = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(ch);
        }
        format!("{}{grouped}", if v < 0.0 { "-" } else { "" })
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else {
        let text = if a >= 1.0 {
            format!("{v:.3}")
        } else {
            format!("{v:.4}")
        };
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The headings of a comparison table and the width of its first column: timed runs call
/// their rows metrics and the ratio's range an interval, simulated runs figures and a range
/// over offsets.
pub struct ComparisonColumns {
    pub label: &'static str,
    pub label_width: usize,
    pub a: &'static str,
    pub b: &'static str,
    pub range: &'static str,
}

/// One row of a comparison table: the label (with its unit), A's and B's figure, B/A as
/// (middle, low, high) when both sides have one, and the verdict in words.
pub struct Comparison {
    pub label: String,
    pub a: f64,
    pub b: f64,
    pub ratio: Option<(f64, f64, f64)>,
    pub verdict: &'static str,
}

/// The table of A against B: a heading line, then a row a figure.
pub fn comparison_table(
    out: &mut dyn Write,
    columns: &ComparisonColumns,
    rows: impl IntoIterator<Item = Comparison>,
) -> anyhow::Result<()> {
    let width = columns.label_width;
    writeln!(
        out,
        "{:<width$} {:>14} {:>14} {:>8}  {:<18} verdict",
        columns.label, columns.a, columns.b, "B/A", columns.range
    )?;
    for row in rows {
        let (ratio, range) = match row.ratio {
            Some((middle, low, high)) => (format!("{middle:.3}"), format!("[{low:.3}, {high:.3}]")),
            None => ("-".to_string(), "-".to_string()),
        };
        writeln!(
            out,
            "{:<width$} {:>14} {:>14} {:>8}  {:<18} {}",
            row.label,
            number(row.a),
            number(row.b),
            ratio,
            range,
            row.verdict
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_for_people() {
        assert_eq!(number(7316442110.0), "7,316,442,110");
        assert_eq!(number(12345.4), "12,345");
        assert_eq!(number(165.0), "165");
        assert_eq!(number(165.25), "165.2");
        assert_eq!(number(1.38), "1.38");
        assert_eq!(number(29.5), "29.5");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(0.05234), "0.0523");
        assert_eq!(number(0.0), "0");
    }

    #[test]
    fn a_row_without_a_ratio_shows_dashes() {
        let columns = ComparisonColumns {
            label: "metric",
            label_width: 10,
            a: "A",
            b: "B",
            range: "range",
        };
        let rows = [Comparison {
            label: "cycles".into(),
            a: 12345.0,
            b: 2.5,
            ratio: None,
            verdict: "no data",
        }];
        let mut out = Vec::new();
        comparison_table(&mut out, &columns, rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert_eq!(
            row,
            "cycles             12,345            2.5        -  -                  no data"
        );
    }
}
