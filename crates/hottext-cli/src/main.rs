//! The `hottext` command: argument parsing, progress, human and JSON output. The work itself is
//! in the `hottext` library, one module per pipeline stage.
//!
//! Exit status: 0 success, 1 a check failed (e.g. `verify` found no hot text), 2 usage or input
//! error. Messages go to stderr prefixed with `hottext:`; results go to stdout.

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hottext",
    version,
    about = "Find the hot code of a binary, lay it out contiguously, put it on huge pages",
    long_about = "Find the hot code of a binary, lay it out contiguously at link time, and map it onto 2 MiB \
                  pages at start-up.\n\nThe pipeline, one verb a stage:\n  \
                  hottext record  -o perf.data -- ./server     sample the running program with perf\n  \
                  hottext profile perf.data --binary ./server -o server.profile\n  \
                  hottext order   server.profile --format ld-script -o hot.ld\n  \
                  (relink with -Wl,-T,hot.ld)\n  \
                  hottext verify  --binary ./server\n\n\
                  Exit status: 0 success, 1 a check failed, 2 usage or input error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Record(cmd::record::Args),
    Profile(cmd::profile::Args),
    Order(cmd::order::Args),
    Verify(cmd::verify::Args),
    Store(cmd::store::Args),
    Pipeline(cmd::pipeline::Args),
    Fetch(cmd::fetch::Args),
    Stat(cmd::stat::Args),
    Ab(cmd::ab::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(args) => cmd::record::run(args),
        Command::Profile(args) => cmd::profile::run(args),
        Command::Order(args) => cmd::order::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Store(args) => cmd::store::run(args),
        Command::Pipeline(args) => cmd::pipeline::run(args),
        Command::Fetch(args) => cmd::fetch::run(args),
        Command::Stat(args) => cmd::stat::run(args),
        Command::Ab(args) => cmd::ab::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("hottext: {err:#}");
            ExitCode::from(2)
        }
    }
}
