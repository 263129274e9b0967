//! `order --format ranges` and `--format lld-cgprofile`: outputs that write no order of ours.

use std::process::ExitCode;

use anyhow::bail;
use hottext::binary::{Binary, HUGE_PAGE};
use hottext::graph::fit::Placement;
use hottext::graph::Graph;
use hottext::link::{self, Target};

use super::report::{Range, Summary};
use super::{with_profile_line, write_output, Args};
use crate::cmd::FormatArg;
use crate::output;

/// Writes the ranges file or lld's call edges for `graph` (fitted to `binary`, whose functions
/// sit at `addresses`), then the summary.
pub(super) fn run(
    args: &Args,
    graph: &Graph,
    binary: Option<&Binary>,
    addresses: Option<&Placement>,
    mut summary: Summary,
) -> anyhow::Result<ExitCode> {
    // The preload library refuses a ranges file made for another build.
    let build_id = binary.and_then(Binary::build_id_hex);
    let target = match (args.format, addresses, binary) {
        (FormatArg::LldCgprofile, at, _) => Target::CallGraphProfile { at },
        (_, Some(at), Some(binary)) => Target::Ranges {
            at,
            text: &binary.exec_segments,
            build_id: build_id.as_deref(),
            max_pages: args.max_huge_pages,
        },
        _ => bail!("--format ranges lists addresses of a binary: give --binary BIN"),
    };
    let written = link::write(graph, target).map_err(|e| with_profile_line(e, &args.profile))?;
    write_output(args.output.as_deref(), &written.bytes)?;
    if args.format == FormatArg::Ranges {
        let pages: u64 = written
            .ranges
            .iter()
            .map(|(s, e)| (e.0 - s.0) / HUGE_PAGE)
            .sum();
        if !args.json {
            eprintln!(
                "hottext: {pages} hot 2 MiB pages in {} ranges",
                written.ranges.len()
            );
        }
        if written.partial_pages > 0 {
            // The runtime maps no page that reaches past the text: these cannot be had
            // without relinking.
            output::warn(format!(
                "{} of the 2 MiB pages that hold the hot code are not whole pages of the binary's text and are left out (the runtime could not map them); relinking with a hottext layout gathers the hot code into whole pages (`hottext order --format ld-script`, padded by default)",
                written.partial_pages
            ));
        }
        summary.ranges = Some(
            written
                .ranges
                .iter()
                .map(|&(start, end)| Range { start, end })
                .collect(),
        );
    }
    if args.json {
        output::json(&summary)?;
    }
    Ok(ExitCode::SUCCESS)
}
