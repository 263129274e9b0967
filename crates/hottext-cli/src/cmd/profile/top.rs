//! The figures a user asks first: where the processes' CPU went (the binary itself, the
//! kernel, each library), and the hottest functions, as `perf report` lists them.

use std::io::Write;

use hottext::demangle::readable_short;
use hottext::graph::Graph;
use hottext::profile::CpuShares;
use serde::Serialize;

use crate::output;

/// Places listed besides the binary; the rest are summed in one line.
const PLACES_SHOWN: usize = 6;
/// Width of a function's name in the table.
const NAME_WIDTH: usize = 90;

/// One row of `--top`, in the JSON document: the mangled name, as in the profile.
#[derive(Serialize)]
pub(super) struct TopFunction {
    name: String,
    self_samples: u64,
    /// Of the binary's samples (0 to 1).
    self_fraction: f64,
    /// Of the processes' samples, wherever they fell (0 to 1).
    process_fraction: f64,
}

/// The `n` functions with the most samples of their own, the most first (ties by name).
pub(super) fn top(graph: &Graph, shares: &CpuShares, n: usize) -> Vec<TopFunction> {
    let in_binary = graph.total_samples().max(1) as f64;
    let mut funcs: Vec<_> = graph.funcs().iter().filter(|f| f.samples > 0).collect();
    funcs.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    funcs
        .into_iter()
        .take(n)
        .map(|f| TopFunction {
            name: f.name.clone(),
            self_samples: f.samples,
            self_fraction: f.samples as f64 / in_binary,
            process_fraction: shares.fraction(f.samples),
        })
        .collect()
}

/// Where the processes' samples fell, the binary first, and what that bounds.
pub(super) fn print_shares(out: &mut dyn Write, s: &CpuShares, bin: &str) -> std::io::Result<()> {
    if s.process_samples == 0 {
        return Ok(());
    }
    let pct = |n: u64| 100.0 * s.fraction(n);
    writeln!(
        out,
        "  CPU of {bin}'s processes ({} samples):",
        s.process_samples
    )?;
    writeln!(
        out,
        "    {:5.1}%  {bin} itself: the most a layout of {bin} can speed up",
        pct(s.binary_samples)
    )?;
    for place in s.elsewhere.iter().take(PLACES_SHOWN) {
        writeln!(
            out,
            "    {:5.1}%  {}",
            pct(place.samples),
            output::printable(&place.place)
        )?;
    }
    let rest = &s.elsewhere[s.elsewhere.len().min(PLACES_SHOWN)..];
    if !rest.is_empty() {
        let samples = rest.iter().map(|p| p.samples).sum();
        writeln!(
            out,
            "    {:5.1}%  {} other places",
            pct(samples),
            rest.len()
        )?;
    }
    Ok(())
}

/// `--top`: self samples as shares of the binary's and of the processes' samples. The profile
/// keeps one caller a sample, not whole stacks, so there is no with-callees column.
pub(super) fn print_top(
    out: &mut dyn Write,
    top: &[TopFunction],
    bin: &str,
) -> std::io::Result<()> {
    if top.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  hottest functions by samples of their own, as shares of {bin}'s and of its processes':"
    )?;
    writeln!(
        out,
        "  {:>8} {:>8} {:>9}  function",
        bin_column(bin),
        "process",
        "samples"
    )?;
    for f in top {
        writeln!(
            out,
            "  {:>7.2}% {:>7.2}% {:>9}  {}",
            100.0 * f.self_fraction,
            100.0 * f.process_fraction,
            f.self_samples,
            readable_short(&f.name, NAME_WIDTH)
        )?;
    }
    Ok(())
}

/// The binary's column heading: its name, cut to fit.
fn bin_column(bin: &str) -> String {
    bin.chars().take(8).collect()
}
