//! One printer per output format: a verb's result implements [`Report`] and the verb ends
//! with [`emit`], which prints it as the JSON document or for a person, then finishes it.

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;

/// How a run prints its result: for a person, or as one JSON document on stdout (`--json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Human,
    Json,
}

/// `--json`, one argument for every verb that has it (`#[command(flatten)] json: OutputArgs`).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct OutputArgs {
    /// Print the result as one JSON document on stdout, also when the run fails
    /// (docs/output.md)
    #[arg(long)]
    pub json: bool,
}

impl OutputArgs {
    /// The mode `--json` asks for.
    pub fn mode(self) -> Mode {
        match self.json {
            true => Mode::Json,
            false => Mode::Human,
        }
    }

    /// Refuses `--json` without `-o` in a verb whose payload (`what`) would otherwise go to
    /// stdout, which the document needs for itself.
    pub fn refuse_payload_on_stdout(
        self,
        output: Option<&std::path::Path>,
        what: &str,
    ) -> anyhow::Result<()> {
        if self.json && output.is_none() {
            anyhow::bail!("--json prints the figures on stdout; give -o FILE for the {what}");
        }
        Ok(())
    }

    /// Whether the verb (or subcommand) that runs was given `--json`, from clap's parse of the
    /// whole command line: then the run owes a JSON document on stdout whatever its exit
    /// status, also when it fails before its own arguments reach it.
    pub fn asked(matches: &clap::ArgMatches) -> bool {
        let mut innermost = matches;
        while let Some((_, sub)) = innermost.subcommand() {
            innermost = sub;
        }
        matches!(innermost.try_get_one::<bool>("json"), Ok(Some(true)))
    }
}

/// The stream a report's human form goes to (docs/output.md's stream table); the JSON form
/// always goes to stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A verb's result: it serialises itself for `--json`, prints itself for a person on its
/// stream, and says what follows it on stderr and the exit status.
pub trait Report: Serialize {
    /// Where [`Report::print`] writes. Stdout unless the verb's stdout belongs to something
    /// else (the measured command's output).
    const STREAM: Stream = Stream::Stdout;

    /// The human form.
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()>;

    /// In the human form, a `hottext:` line on stderr after a report that is a payload on
    /// stdout (what was stored, how many were listed): a script piping stdout never sees it.
    fn note(&self) -> Option<String> {
        None
    }

    /// After the report in either form: warnings and reasons for failing on stderr, and the
    /// exit status (an error for a run that cannot count as done, such as an interrupted one).
    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        Ok(ExitCode::SUCCESS)
    }
}

/// Prints `report` in `mode` and finishes it: the one place a verb's result reaches a stream.
pub fn emit<R: Report>(report: &R, mode: Mode) -> anyhow::Result<ExitCode> {
    match (mode, R::STREAM) {
        (Mode::Json, _) => super::json(report)?,
        (Mode::Human, Stream::Stdout) => report.print(&mut std::io::stdout().lock())?,
        (Mode::Human, Stream::Stderr) => report.print(&mut std::io::stderr().lock())?,
    }
    if let (Mode::Human, Some(note)) = (mode, report.note()) {
        eprintln!("hottext: {note}");
    }
    report.finish(mode)
}
