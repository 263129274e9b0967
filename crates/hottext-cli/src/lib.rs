//! The `hottext` command: argument parsing, progress, human and JSON output. The work itself is
//! in the `hottext` library, one module per pipeline stage.
//!
//! docs/output.md is the output contract: which stream gets what, the exit statuses (0 success,
//! 1 the checked outcome failed, 2 usage or input error), the JSON documents, `--verbose`.
//!
//! A library so that tests/contract.rs can read what the code declares ([`report_streams`]);
//! the binary, `src/main.rs`, only sets the allocator and calls [`main`].

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use cmd::report_streams;
pub use output::Stream;

/// Find the hot code of a binary, lay it out contiguously at link time, map it onto 2 MiB pages
///
/// The pipeline, one verb a stage:
///   hottext record  -o perf.data -- ./server     sample the running program with perf
///   hottext profile perf.data --binary ./server -o server.profile
///   hottext order   server.profile --format ld-script -o hot.ld
///   (relink with -Wl,-T,hot.ld)
///   hottext verify  --binary ./server
///
/// Exit status: 0 success, 1 the checked outcome failed (a check, a command, a profile that
/// cannot be used), 2 usage or input error. Messages go to stderr, prefixed `hottext:`; with
/// --json, stdout holds one JSON document with a `schema` field (docs/output.md).
#[derive(Parser)]
#[command(name = "hottext", version, verbatim_doc_comment)]
struct Cli {
    /// Print the parameters each stage uses (thresholds, sampling event and rate) on stderr.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Record(cmd::record::Args),
    Profile(cmd::profile::Args),
    Order(cmd::order::Args),
    Merge(cmd::merge::Args),
    Verify(cmd::verify::Args),
    Report(cmd::report::Args),
    Store(cmd::store::Args),
    Pipeline(cmd::pipeline::Args),
    Fetch(cmd::fetch::Args),
    Stat(cmd::stat::Args),
    Doctor(cmd::doctor::Args),
    Tune(cmd::tune::Args),
    // Boxed: its many options make it much larger than the other verbs' arguments.
    Ab(Box<cmd::ab::Args>),
}

/// The `hottext` command: parses the command line, runs the verb, prints an error the way
/// docs/output.md says and returns the exit status.
pub fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let json = output::OutputArgs::asked(&matches);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    output::set_verbose(cli.verbose);
    let result = match cli.command {
        Command::Record(args) => cmd::record::run(args),
        Command::Profile(args) => cmd::profile::run(args),
        Command::Order(args) => cmd::order::run(args),
        Command::Merge(args) => cmd::merge::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Store(args) => cmd::store::run(args),
        Command::Pipeline(args) => cmd::pipeline::run(args),
        Command::Fetch(args) => cmd::fetch::run(args),
        Command::Stat(args) => cmd::stat::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Tune(args) => cmd::tune::run(args),
        Command::Ab(args) => cmd::ab::run(*args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("hottext: {}", output::printable(&format!("{err:#}")));
            if json {
                output::json_error(&err);
            }
            if err.is::<output::Failed>() {
                ExitCode::from(1)
            } else {
                ExitCode::from(2)
            }
        }
    }
}
