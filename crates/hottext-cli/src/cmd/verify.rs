//! `hottext verify`: is the hot text in place.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use hottext::binary::Binary;
use hottext::verify::check_binary;

use crate::output;

/// Check that a binary holds a 2 MiB-aligned hot range between __hot_start and __hot_end.
///
/// Exit status 1 when the markers are missing, the range is empty or misaligned, or no function
/// lies inside it.
///
/// Example: hottext verify --binary ./server
#[derive(clap::Args)]
pub struct Args {
    /// The linked executable to check.
    #[arg(long, value_name = "BIN")]
    binary: PathBuf,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let binary = Binary::open(&args.binary).context("cannot verify")?;
    let report = check_binary(&binary);
    if args.json {
        output::json(&report)?;
    } else if let (Some(start), Some(end)) = (report.start, report.end) {
        println!("hot text   {}", report.binary);
        println!(
            "range      [{start:#x}, {end:#x})  {}",
            output::bytes(report.size)
        );
        println!(
            "aligned    {}",
            if report.start_aligned_2m {
                "yes, start on a 2 MiB boundary"
            } else {
                "NO"
            }
        );
        println!("functions  {} inside", report.functions_inside);
        println!("2 MiB pages {}", report.huge_pages);
    }
    if report.passed() {
        if !args.json {
            println!("ok");
        }
        return Ok(ExitCode::SUCCESS);
    }
    for p in &report.problems {
        eprintln!("hottext: verify failed: {p}");
    }
    Ok(ExitCode::from(1))
}
