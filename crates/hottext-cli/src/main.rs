//! The `hottext` command: argument parsing, progress, human and JSON output. The work itself is
//! in the `hottext` library, one module per pipeline stage.
//!
//! docs/output.md is the output contract: which stream gets what, the exit statuses (0 success,
//! 1 the checked outcome failed, 2 usage or input error), the JSON documents, `--verbose`.

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Large buffers on huge pages: ordering a large profile reads them at random
/// (`hottext::os::huge_heap`).
#[global_allocator]
static ALLOCATOR: hottext::os::huge_heap::HugeHeap = hottext::os::huge_heap::HugeHeap;

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

impl Command {
    /// Whether the run owes a JSON document on stdout, whatever its exit status.
    fn json(&self) -> bool {
        match self {
            Command::Record(a) => a.json,
            Command::Profile(a) => a.json,
            Command::Order(a) => a.json,
            Command::Merge(a) => a.json,
            Command::Verify(a) => a.json,
            Command::Report(_) => false,
            Command::Store(a) => a.json(),
            Command::Pipeline(a) => a.json(),
            Command::Fetch(a) => a.json,
            Command::Stat(a) => a.json,
            Command::Doctor(a) => a.json,
            Command::Tune(a) => a.json,
            Command::Ab(a) => a.json,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    output::set_verbose(cli.verbose);
    let json = cli.command.json();
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
