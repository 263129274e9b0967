//! `hottext report`: one HTML page from what the other verbs wrote.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context};
use hottext::binary::{Binary, StatedAddr};
use hottext::graph::Graph;
use hottext::report::{heat_map, mark_huge, render, ForestRow, HistoryRow, Report};
use serde::Serialize;
use serde_json::Value;

use super::{refuse_outputs_over_inputs, write_output_file};
use crate::output::{self, Mode};

/// Write one self-contained HTML page: heat maps, layout figures, A/B verdicts, huge pages
///
/// The page loads nothing and opens from disk (send it around). It shows what it is given:
///   --profile with --before and/or --after: the text's heat map, 4 KiB pages coloured by
///     samples, in each binary (the default link and the relinked one), the hot range marked;
///   `order --json` files: the layout figures and --algorithm auto's candidates;
///   `ab --json` files (with or without --simulate): a forest plot of B/A with intervals;
///   `verify --pid --json` files: each 2 MiB page of the hot range and its backing, marked on
///     the --after heat map;
///   --repo with --meta: the pipeline's commits of the meta file, week by week.
///
/// Examples:
///   hottext report --profile app.profile --before ./app-base --after ./app order.json ab.json -o report.html
///   hottext report --repo . --meta hottext/app.meta -o history.html
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// JSON documents of `order`, `ab` and `verify --pid` (each recognised by its fields).
    #[arg(value_name = "JSON")]
    artefacts: Vec<PathBuf>,
    /// The profile whose samples colour the heat maps.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<PathBuf>,
    /// The binary as linked by default (needs --profile).
    #[arg(long, value_name = "BIN", requires = "profile")]
    before: Option<PathBuf>,
    /// The binary relinked with hottext's layout (needs --profile).
    #[arg(long, value_name = "BIN", requires = "profile")]
    after: Option<PathBuf>,
    /// A service repository whose pipeline commits of --meta make the history.
    #[arg(long, value_name = "DIR", requires = "meta")]
    repo: Option<PathBuf>,
    /// The meta file's path inside --repo.
    #[arg(long, value_name = "PATH", requires = "repo")]
    meta: Option<PathBuf>,
    /// The page's title.
    #[arg(long, default_value = "hottext report")]
    title: String,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inputs: Vec<&Path> = [&args.profile, &args.before, &args.after, &args.meta]
        .into_iter()
        .flatten()
        .chain(&args.artefacts)
        .map(PathBuf::as_path)
        .collect();
    refuse_outputs_over_inputs(&[("-o", Some(&args.output))], &inputs)?;
    let mut report = Report {
        title: args.title.clone(),
        ..Report::default()
    };
    if let Some(path) = &args.profile {
        if args.before.is_none() && args.after.is_none() {
            bail!(
                "--profile colours the heat map of a binary: give --before BIN and/or --after BIN"
            );
        }
        let file =
            File::open(path).with_context(|| format!("cannot open profile {}", path.display()))?;
        let profile = Graph::read(BufReader::with_capacity(1 << 20, file))
            .with_context(|| format!("cannot read profile {}", path.display()))?;
        report.sources.push(path.display().to_string());
        for (side, bin) in [("before", &args.before), ("after", &args.after)] {
            let Some(bin) = bin else { continue };
            let binary = Binary::open(bin).context("cannot draw its heat map")?;
            let title = format!("{side}: {}", bin.display());
            // Code that cannot be read matches by name only: the map is still drawn.
            report.heat_maps.push(heat_map(&title, &profile, &binary));
            report.sources.push(bin.display().to_string());
        }
    }
    for path in &args.artefacts {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let doc: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a JSON document", path.display()))?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        add_artefact(&mut report, &doc, &name).with_context(|| format!("{}", path.display()))?;
        report.sources.push(path.display().to_string());
    }
    if let (Some(repo), Some(meta)) = (&args.repo, &args.meta) {
        report.history = history(repo, meta)?;
        report
            .sources
            .push(format!("{} ({})", repo.display(), meta.display()));
    }
    if report.sources.is_empty() {
        bail!("nothing to show: give --profile with --before/--after, JSON files, or --repo with --meta");
    }
    let page = render(&report);
    write_output_file(&args.output, page.as_bytes())?;
    let written = Written {
        output: args.output,
        bytes: page.len() as u64,
    };
    // No --json: what `report` makes is the page.
    output::emit(&written, Mode::Human)
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] =
    &[("report", <Written as output::Report>::STREAM)];

/// The page `report` wrote, and its size.
#[derive(Serialize)]
struct Written {
    output: PathBuf,
    bytes: u64,
}

impl output::Report for Written {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let size = output::bytes(self.bytes);
        writeln!(out, "wrote {} ({size})", self.output.display())?;
        Ok(())
    }
}

/// Adds what `doc` holds; a document of no known verb is an error.
fn add_artefact(report: &mut Report, doc: &Value, name: &str) -> anyhow::Result<()> {
    if doc.get("ordered").is_some() || doc.get("candidates").is_some() {
        order_figures(report, doc);
    } else if let Some(rows) = doc.get("rows").and_then(Value::as_array) {
        let service = doc.get("form").and_then(Value::as_str) == Some("service");
        for row in rows {
            report.forest.extend(forest_row(row, name, service));
        }
    } else if let (Some(pages), Some(bias)) = (
        doc.get("pages").and_then(Value::as_array),
        doc.get("load_bias").and_then(Value::as_u64),
    ) {
        let mut huge = Vec::new();
        for p in pages {
            let address = p["address"].as_u64().context("a page without an address")?;
            let backing = p["backing"].as_str().unwrap_or("?").to_string();
            if backing != "small" {
                huge.push(StatedAddr(address.saturating_sub(bias)));
            }
            report.huge_pages.push((address, backing));
        }
        if let Some(after) = report.heat_maps.last_mut() {
            mark_huge(after, &huge);
        }
    } else if let Some(hot) = doc
        .get("hot")
        .filter(|_| doc.get("start_aligned_2m").is_some())
    {
        // verify --binary: what the linked range holds.
        report.figures.push((
            format!("linked hot range ({name})"),
            "-".into(),
            format!(
                "{} functions, {} B of code in {} B; 2 MiB aligned: {}",
                hot["functions"], hot["bytes"], doc["size"], doc["start_aligned_2m"]
            ),
        ));
    } else {
        bail!("not a JSON document of `order`, `ab` or `verify` (no ordered, rows, pages or hot field)");
    }
    Ok(())
}

/// How a figure of a JSON document is shown.
type Shown = dyn Fn(&Value) -> String;

/// The layout rows of an `order --json` document, and its candidates.
fn order_figures(report: &mut Report, doc: &Value) {
    let (cur, new) = (&doc["current"], &doc["ordered"]);
    let count = |v: &Value| v.as_u64().map_or("-".into(), |x| x.to_string());
    let share = |v: &Value| {
        v.as_f64()
            .map_or("-".into(), |x| format!("{:.1}%", 100.0 * x))
    };
    let distance = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.3e}"));
    let rows: [(&str, &str, &Shown); 6] = [
        ("4 KiB pages for 99% of samples", "pages_4k_99", &count),
        ("2 MiB pages for 99% of samples", "pages_2m_99", &count),
        ("call weight within 64 B", "calls_within_64b", &share),
        ("call weight on its 4 KiB page", "calls_within_4k", &share),
        ("call weight within 2 MiB", "calls_within_2m", &share),
        (
            "weighted call distance",
            "weighted_call_distance",
            &distance,
        ),
    ];
    for (label, key, show) in rows {
        if new.get(key).is_some() {
            report
                .figures
                .push((label.into(), show(&cur[key]), show(&new[key])));
        }
    }
    if let Some(hot) = doc.get("hot") {
        report.figures.push((
            "hot functions (hot bytes)".into(),
            "-".into(),
            format!("{} ({} B)", hot["functions"], hot["bytes"]),
        ));
    }
    for c in doc["candidates"].as_array().into_iter().flatten() {
        report.candidates.push((
            c["algorithm"].as_str().unwrap_or("?").to_string(),
            c["score"].as_f64().unwrap_or(f64::NAN),
            c["metrics"]["icache_overflow"].as_f64().unwrap_or(f64::NAN),
            c["metrics"]["pages_4k_99"].as_u64().unwrap_or(0),
            c["chosen"].as_bool().unwrap_or(false),
        ));
    }
}

/// A row of `ab --json`: measured (`comparison.ratio` low/high, a value a run) or simulated
/// (`ratio` min/max, spreads over offsets, every figure lower-is-better). `service`: the
/// document of a server run, whose totals count however much load ran.
fn forest_row(row: &Value, source: &str, service: bool) -> Option<ForestRow> {
    let (ratio, low, high, verdict) = match row.get("comparison") {
        Some(c) => (&c["ratio"], "low", "high", &c["verdict"]),
        None => (&row["ratio"], "min", "max", &row["verdict"]),
    };
    let ratio = (|| {
        Some((
            ratio["median"].as_f64()?,
            ratio[low].as_f64()?,
            ratio[high].as_f64()?,
        ))
    })();
    let better = row["better"].as_str().unwrap_or("lower").to_string();
    let unit = row["unit"].as_str().unwrap_or("").to_string();
    let left_out = match ratio {
        _ if better == "neither" => Some("describes the run, neither better nor worse".into()),
        None => Some("no ratio".into()),
        Some((median, low, _)) if median <= 0.0 || low <= 0.0 => {
            Some("B counted none: no ratio to plot".into())
        }
        _ if service && unit.is_empty() => {
            Some("a total of a server run: it counts however much load ran".into())
        }
        _ => None,
    };
    Some(ForestRow {
        source: source.to_string(),
        label: row["label"].as_str()?.to_string(),
        ratio,
        verdict: verdict.as_str().unwrap_or("").to_string(),
        better,
        unit,
        a: median_of(&row["a"]),
        b: median_of(&row["b"]),
        left_out,
    })
}

/// A side's median: a simulated spread's `median`, or the median of a measured side's runs.
fn median_of(side: &Value) -> Option<f64> {
    if let Some(m) = side.get("median").and_then(Value::as_f64) {
        return Some(m);
    }
    let runs: Vec<f64> = side.as_array()?.iter().filter_map(Value::as_f64).collect();
    hottext::measure::stats::median(&runs)
}

/// "merged, 91.0% matched" from the message's `previous` line, or why it was not merged.
fn previous_matched(line: &str) -> String {
    if line.is_empty() || line.starts_with("none") {
        return "none".into();
    }
    match line
        .split_once('(')
        .and_then(|(_, r)| r.split_once("% of its weight matched"))
    {
        Some((share, _)) => format!("merged, {share}% matched"),
        None => line
            .split_once("not merged")
            .map_or(line.to_string(), |(_, why)| format!("not merged{why}")),
    }
}

/// The pipeline's commits of `meta` in `repo`, newest first, read from their messages.
fn history(repo: &Path, meta: &Path) -> anyhow::Result<Vec<HistoryRow>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["log", "--all", "--format=%h%x1f%cs%x1f%B%x1e", "--"])
        .arg(meta)
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git log in {}: {}",
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows = Vec::new();
    for entry in text
        .split('\u{1e}')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let mut fields = entry.splitn(3, '\u{1f}');
        let (commit, date, body) = (
            fields.next().unwrap_or(""),
            fields.next().unwrap_or(""),
            fields.next().unwrap_or(""),
        );
        let after = |prefix: &str| {
            body.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let samples = body
            .lines()
            .next()
            .and_then(|l| {
                l.split_once('(')
                    .map(|(_, r)| r.trim_end_matches(')').to_string())
            })
            .unwrap_or_default();
        let movers: Vec<String> = body
            .lines()
            .skip_while(|l| !l.starts_with("top movers"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .take(3)
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        rows.push(HistoryRow {
            commit: commit.to_string(),
            date: date.to_string(),
            samples,
            previous: previous_matched(&after("previous")),
            coverage: after("coverage"),
            drift: after("drift").split(" (").next().unwrap_or("").to_string(),
            movers: movers.join("; "),
        });
    }
    Ok(rows)
}
