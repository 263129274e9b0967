//! `hottext profile --events`: what a perf.data file's events are and carry, without a binary.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use hottext::profile::{events, Event};
use serde::Serialize;

use super::{progress_bar, Args};
use crate::output;

#[derive(Serialize)]
struct EventList<'a> {
    perf_data: &'a PathBuf,
    events: &'a [Event],
}

/// `--events`: the file's events, on stdout (the list is what was asked for; no profile).
pub(super) fn list(args: &Args, bytes: u64) -> anyhow::Result<ExitCode> {
    let bar = progress_bar(bytes);
    let result = events(&args.perf_data, &mut |done, _| bar.set_position(done));
    bar.finish_and_clear();
    let events = result?;
    let list = EventList {
        perf_data: &args.perf_data,
        events: &events,
    };
    output::emit(&list, args.json.mode())
}

/// The list on stdout: it is what was asked for (no profile is written).
/// The stream of the event list (`profile::STREAMS`).
pub(super) const STREAM: output::Stream = <EventList as output::Report>::STREAM;

impl output::Report for EventList<'_> {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let events = self.events;
        let width = events
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(0)
            .max(5);
        writeln!(
            out,
            "{:<width$}  {:>9}  {:<32}  used",
            "event", "samples", "carries"
        )?;
        for e in events {
            let mut carries = e.carries.describe().to_string();
            if !e.branch_filter.is_empty() {
                carries = format!("{carries} ({})", e.branch_filter.join(","));
            }
            if let Some(stack) = e.also_stack {
                carries = format!("{carries} + {}", stack.describe());
            }
            let used = match (e.used, e.unreadable) {
                (true, _) => "yes".to_string(),
                (false, Some(problem)) => format!("no: its samples {problem}"),
                (false, None) => "no".to_string(),
            };
            writeln!(
                out,
                "{:<width$}  {:>9}  {carries:<32}  {used}",
                output::printable(&e.name),
                e.samples
            )?;
        }
        Ok(())
    }
}
