//! `hottext profile`'s summary: what was read, what matched, and what became of every
//! sample and call (stderr, for a person; the document under --json).

use std::io::Write;
use std::path::PathBuf;

use hottext::graph::BlockCoverage;
use hottext::profile::{MatchedBy, SampleKind, Stats};
use serde::Serialize;

use super::top;
use crate::output::{self, Stream};

#[derive(Serialize)]
pub(super) struct Summary<'a> {
    pub(super) perf_data: &'a PathBuf,
    pub(super) binary: &'a PathBuf,
    pub(super) bytes: u64,
    pub(super) read_seconds: f64,
    pub(super) functions: usize,
    pub(super) edges: usize,
    /// Share (0 to 1) of the binary's samples at an address no function symbol covers.
    pub(super) unresolved_fraction: f64,
    /// How much of the functions with block counts ran (when the binary has a block map).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) block_coverage: Option<BlockCoverage>,
    /// With --top N: the hottest functions (mangled names, as in the profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top: Option<Vec<top::TopFunction>>,
    #[serde(flatten)]
    pub(super) stats: &'a Stats,
}

/// The stream of `profile`'s report (`profile::STREAMS`).
pub(super) const STREAM: Stream = <Summary as output::Report>::STREAM;

impl output::Report for Summary<'_> {
    /// Stderr: without -o the profile is on stdout.
    const STREAM: Stream = Stream::Stderr;

    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let s = self;
        let st = s.stats;
        let bin = s
            .binary
            .file_name()
            .unwrap_or(s.binary.as_os_str())
            .to_string_lossy();
        let matched: Vec<&str> = st
            .matched_by
            .iter()
            .map(|m| match m {
                MatchedBy::BuildId => "build-id",
                MatchedBy::Path => "path",
                MatchedBy::NameAndCode => "file name and code",
                MatchedBy::NameOnly => "file name only",
                _ => "build-id mismatch, allowed",
            })
            .collect();
        writeln!(
            out,
            "hottext: read {} ({}) in {:.2} s",
            s.perf_data.display(),
            output::bytes(s.bytes),
            s.read_seconds
        )?;
        writeln!(
            out,
            "  event             {}: {} samples over {:.1} s",
            output::printable(&st.event.to_string()),
            st.sample_kind,
            st.seconds
        )?;
        writeln!(
            out,
            "  samples           {} (every recorded process)",
            st.samples
        )?;
        writeln!(
            out,
            "  in {bin:<14} {} ({:.1}%), matched by {}",
            st.samples_in_binary,
            percent(st.samples_in_binary, st.samples),
            matched.join(", ")
        )?;
        writeln!(
            out,
            "  without symbol    {} ({:.2}% of {bin}'s)",
            st.samples_unresolved,
            100.0 * s.unresolved_fraction
        )?;
        if st.samples_kernel_only > 0 {
            writeln!(out, "  kernel only       {}", st.samples_kernel_only)?;
        }
        if st.samples_other_pid > 0 {
            writeln!(
                out,
                "  other processes   {} (left out by --pid)",
                st.samples_other_pid
            )?;
        }
        if st.samples_other_events > 0 {
            writeln!(
                out,
                "  other events      {} (not used)",
                st.samples_other_events
            )?;
        }
        print_calls(out, s)?;
        if let Some(c) = &s.block_coverage {
            writeln!(
                out,
                "  basic blocks      {:.1}% of {bin}'s samples, in {} function(s) with block counts; {:.1}% of their {} ran ({} unsampled block(s) inferred to have run)",
                percent(st.samples_in_blocks, st.samples_in_binary),
                c.functions,
                100.0 * c.share(),
                output::bytes(c.bytes),
                st.blocks_inferred
            )?;
        }
        writeln!(out, "  lost samples      {}", st.lost_samples)?;
        writeln!(
            out,
            "  unreadable        {} records of {}",
            st.unreadable_records, st.records
        )?;
        top::print_shares(out, &st.cpu, &bin)?;
        if let Some(rows) = &s.top {
            top::print_top(out, rows, &bin)?;
        }
        Ok(())
    }
}

/// The summary's lines about calls: how many edges, and what became of the calls that could
/// not be read directly (no frame, no stack, tail calls, unwinding failures).
fn print_calls(out: &mut dyn Write, s: &Summary) -> anyhow::Result<()> {
    let st = s.stats;
    writeln!(out, "  functions         {}", s.functions)?;
    writeln!(out, "  call edges        {} (weight {})", s.edges, st.calls)?;
    writeln!(
        out,
        "  no own frame      {} callers recovered, {} unknown (entered through a pointer)",
        st.calls_recovered, st.calls_caller_unknown
    )?;
    if st.sample_kind == SampleKind::Plain {
        writeln!(
        out,
        "  inferred calls    weight {} (no stacks: shared among each function's direct callers by the samples around the calls)",
        st.calls_inferred
    )?;
    }
    if st.calls_tail > 0 || st.calls_tail_undecided > 0 {
        writeln!(
        out,
        "  tail calls        weight {} ({:.1}% of the calls; {} samples shared among possible callers), {} samples undecided (no edge)",
        st.calls_tail,
        percent(st.calls_tail, st.calls),
        st.calls_tail_shared,
        st.calls_tail_undecided
    )?;
    }
    if st.sample_kind == SampleKind::Branch {
        writeln!(
            out,
            "  other branches    {} within functions, {} returns, {} other, {} unclassified",
            st.branches_within_functions,
            st.branches_returns,
            st.branches_other,
            st.branches_unclassified
        )?;
        if st.block_map {
            writeln!(
                out,
                "  block edges       {} jumps between blocks, {} fall-throughs ({} runs between records unused, {} repeated records dropped)",
                st.branches_to_block_edges,
                st.fall_throughs,
                st.fall_throughs_unused,
                st.branches_repeated_dropped
            )?;
        }
    }
    if st.sample_kind == SampleKind::Dwarf {
        writeln!(
            out,
            "  not unwound       {} return addresses beyond perf's stack copy, {} other failures",
            st.stacks_too_short, st.unwind_failed
        )?;
    }
    writeln!(out, "  calls w/o symbol  {}", st.calls_unresolved)?;
    Ok(())
}

/// `n` as a percentage of `of`; 0 when `of` is.
fn percent(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    }
}
