//! One module per verb; each has `Args` (clap) and `run`.

pub mod ab;
pub mod doctor;
pub mod fetch;
pub mod merge;
pub mod order;
pub mod pipeline;
pub mod profile;
pub mod record;
pub mod report;
mod simulate;
pub mod stat;
pub mod store;
pub mod tune;
pub mod verify;

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use hottext::binary::Binary;
use hottext::link::{
    self, host_architecture, markers_object, Format, Markers, Padding, FORMATS, MARKERS_ADVICE,
};
use hottext::os::files::{same_file, write_atomic};

use crate::output;

/// Each verb's rows of docs/output.md's stream table (tests/contract.rs compares them): where
/// the human form of its result goes, as its report type declares it
/// (`output::Report::STREAM`).
pub fn report_streams() -> Vec<(&'static str, output::Stream)> {
    [
        record::STREAMS,
        profile::STREAMS,
        order::STREAMS,
        fetch::STREAMS,
        merge::STREAMS,
        verify::STREAMS,
        report::STREAMS,
        store::STREAMS,
        pipeline::STREAMS,
        stat::STREAMS,
        doctor::STREAMS,
        tune::STREAMS,
        ab::STREAMS,
    ]
    .concat()
}

/// The parser of `--format` of the verbs that write an order (`order`, `fetch`): the
/// library's table of formats, each with its help line, so that a format added there is
/// offered here.
pub fn format_parser() -> impl TypedValueParser<Value = &'static Format> {
    let choices = FORMATS
        .iter()
        .map(|f| PossibleValue::new(f.name).help(f.help));
    PossibleValuesParser::new(choices)
        .try_map(|name| link::format(&name).ok_or_else(|| format!("no format {name:?}")))
}

/// `--pad-hot-range` of `order` and `fetch` (`hottext::link::padding`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PaddingArg {
    /// Pad when the binary's text would not fill the range's last 2 MiB page (always without
    /// --binary): then the runtime would lose that page
    Auto,
    /// Always end the range on a 2 MiB boundary
    Always,
    /// Never pad: a range followed by too little text loses its last huge page
    Never,
}

impl From<PaddingArg> for Padding {
    fn from(arg: PaddingArg) -> Padding {
        match arg {
            PaddingArg::Auto => Padding::Auto,
            PaddingArg::Always => Padding::Always,
            PaddingArg::Never => Padding::Never,
        }
    }
}

/// `--pid`: a process id, which is positive.
pub fn pid_arg() -> clap::builder::RangedI64ValueParser<hottext::os::proc::Pid> {
    clap::value_parser!(hottext::os::proc::Pid).range(1..)
}

/// `--markers FILE` of `order` and `fetch`: writes the markers object `markers` asks for, for
/// `binary`'s architecture (this machine's without one), or, when the linker input needs it
/// and none was asked for, says so. Nothing for an output that is no order (`markers` `None`).
pub fn write_markers(
    path: Option<&Path>,
    binary: Option<&Binary>,
    markers: Option<Markers>,
) -> anyhow::Result<()> {
    let Some(markers) = markers else {
        return Ok(());
    };
    let Some(path) = path else {
        if markers.needed {
            output::warn(MARKERS_ADVICE);
        }
        return Ok(());
    };
    let arch = binary.map_or_else(host_architecture, |b| b.architecture);
    let bytes = markers_object(arch, markers.pad_to_huge_page)
        .context("cannot build the markers object")?;
    write_output_file(path, &bytes)
}

/// A verb's output option (`-o`, `--markers`) and its path, when given.
pub type OutputArg<'a> = (&'static str, Option<&'a Path>);

/// Refuses, before any work, an output that is one of the verb's `inputs` (writing it would
/// destroy what is read: `order a.profile -o a.profile`), also through a symbolic or hard
/// link, and two outputs that are one file (the second would replace the first).
pub fn refuse_outputs_over_inputs(outputs: &[OutputArg], inputs: &[&Path]) -> anyhow::Result<()> {
    let given: Vec<(&str, &Path)> = outputs
        .iter()
        .filter_map(|&(option, path)| Some((option, path?)))
        .collect();
    for (i, &(option, path)) in given.iter().enumerate() {
        if let Some(input) = inputs.iter().find(|input| same_file(path, input)) {
            bail!(
                "{option} {} is the same file as the input {}: writing it would destroy the input; give another output path",
                path.display(),
                input.display()
            );
        }
        if let Some((other, other_path)) = given[..i]
            .iter()
            .find(|(_, p)| *p == path || same_file(p, path))
        {
            bail!(
                "{other} {} and {option} {} are the same file: give each output its own path",
                other_path.display(),
                path.display()
            );
        }
    }
    Ok(())
}

/// Writes a verb's output to the file `path` (`write_output_file`), or to stdout without one.
pub fn write_output(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    let Some(path) = path else {
        let mut out = std::io::stdout().lock();
        return Ok(out.write_all(bytes).and_then(|()| out.flush())?);
    };
    write_output_file(path, bytes)
}

/// Writes a verb's output file atomically (`hottext::os::files::write_atomic`: never
/// half-written, never through or over a symbolic link), with the path in the error.
pub fn write_output_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
