//! The output contract of docs/output.md, in one place: the JSON printer (every document carries
//! `schema`, one document a run), the error document, the outcome that exits 1, warnings,
//! `--verbose` parameters; a verb's result reaches its stream through `emit`, figures and
//! tables for people are in `tables`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

mod emit;
mod tables;
pub use emit::{emit, Mode, OutputArgs, Report, Stream};
pub use tables::{bytes, comparison_table, number, with_unit, Comparison, ComparisonColumns};

/// The version of the JSON documents' shape, in every document as `schema`. Raise it when a
/// field is renamed or removed or changes its meaning; adding a field does not raise it.
pub const SCHEMA: u32 = 2;

/// Set once a JSON document is on stdout: a run prints at most one.
static JSON_PRINTED: AtomicBool = AtomicBool::new(false);
/// `--verbose`: print the parameters each stage uses.
static VERBOSE: AtomicBool = AtomicBool::new(false);

#[derive(Serialize)]
struct Document<'a, T: Serialize> {
    schema: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// Prints `value` (a struct or map) as the run's JSON document on stdout, with `schema` first.
pub fn json(value: &impl Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let doc = Document {
        schema: SCHEMA,
        body: value,
    };
    serde_json::to_writer_pretty(&mut out, &doc)?;
    writeln!(out)?;
    JSON_PRINTED.store(true, Ordering::SeqCst);
    Ok(())
}

/// The document of a run that ended without its report (exit status 1 or 2), unless the verb
/// printed its own before it failed.
pub fn json_error(err: &anyhow::Error) {
    if JSON_PRINTED.load(Ordering::SeqCst) {
        return;
    }
    #[derive(Serialize)]
    struct Error {
        error: String,
    }
    let doc = Error {
        error: format!("{err:#}"),
    };
    // stdout may be closed; the message is on stderr already.
    let _ = json(&doc);
}

/// An outcome a verb checks for, not a problem with its input: `main` exits with status 1
/// (a command that failed, a profile that cannot be used), where other errors exit 2.
#[derive(Debug)]
pub struct Failed(String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

pub fn failed(msg: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Failed(msg.to_string()))
}

pub fn warn(msg: impl std::fmt::Display) {
    eprintln!("hottext: warning: {}", printable(&msg.to_string()));
}

/// `text` safe to print on a terminal: names from files (a mapped file's path in perf.data, a
/// symbol, a profile's header) could hold escape sequences that drive it, so every control
/// character but the line break is written as a Rust escape (`\u{1b}`).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let escape = |c: char| c.is_control() && c != '\n';
    if !text.contains(escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::SeqCst);
}

/// Under `--verbose`, the parameters `stage` uses, one `name value` line each on stderr (so
/// they never mix with a payload or JSON on stdout); nested fields are named `outer.inner`.
pub fn parameters(stage: &str, params: &impl Serialize) {
    if !VERBOSE.load(Ordering::SeqCst) {
        return;
    }
    let mut lines = Vec::new();
    match serde_json::to_value(params) {
        Ok(value) => flatten("", &value, &mut lines),
        Err(e) => lines.push(("?".to_string(), e.to_string())),
    }
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "hottext: {stage} parameters:");
    if lines.is_empty() {
        let _ = writeln!(err, "  (none)");
    }
    for (key, value) in lines {
        let _ = writeln!(err, "  {key:<width$}  {value}");
    }
}

fn flatten(prefix: &str, value: &serde_json::Value, lines: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, lines);
            }
        }
        serde_json::Value::String(s) => lines.push((prefix.to_string(), s.clone())),
        other => lines.push((prefix.to_string(), other.to_string())),
    }
}

/// The longest span any option takes: longer ones are mistakes, and a time that far ahead
/// cannot even be represented as an `Instant` on some systems.
const MAX_SECONDS: f64 = 100.0 * 365.0 * 86400.0;

/// An option's seconds as a `Duration`: a number from 0 to 100 years, else an error naming
/// the option (exit status 2), never a panic.
pub fn seconds(option: &str, value: f64) -> anyhow::Result<std::time::Duration> {
    if !(0.0..=MAX_SECONDS).contains(&value) {
        anyhow::bail!(
            "{option} {value:?}: give a number of seconds from 0 to {MAX_SECONDS:.0} (100 years)"
        );
    }
    Ok(std::time::Duration::from_secs_f64(value))
}
