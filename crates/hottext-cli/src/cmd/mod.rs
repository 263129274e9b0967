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

use std::path::Path;

use anyhow::{bail, Context};
use hottext::binary::Binary;
use hottext::link::{host_architecture, markers_object, Format, Padding, MARKERS_ADVICE};
use hottext::os::files::{same_file, write_atomic};

use crate::output;

/// Each verb's rows of docs/output.md's stream table (tests/contract.rs compares them): where
/// the human form of its result goes, as its report type declares it
/// ([`output::Report::STREAM`]).
pub fn report_streams() -> Vec<(&'static str, output::Stream)> {
    // `order` and `fetch` print outside `output::emit` so far: their streams are stated here
    // until they hand a report to it.
    let unconverted: &[(&str, output::Stream)] = &[
        ("order", output::Stream::Stderr),
        ("fetch", output::Stream::Stdout),
    ];
    [
        record::STREAMS,
        profile::STREAMS,
        unconverted,
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

/// `--format` of the verbs that write an order (`order`, `fetch`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// One symbol a line
    List,
    /// GNU ld / lld linker script (-Wl,-T,FILE)
    LdScript,
    /// gold --section-ordering-file (with --markers)
    GoldOrder,
    /// lld --symbol-ordering-file (with --markers)
    LldOrder,
    /// Hottest 2 MiB ranges of the unmodified binary, for the LD_PRELOAD runtime (order only)
    Ranges,
    /// The call edges for lld's own ordering, -Wl,--call-graph-ordering-file=FILE with
    /// --call-graph-profile-sort=cdsort or hfsort: no markers, for comparing lld's orders
    /// (order only)
    LldCgprofile,
}

impl FormatArg {
    /// The order file this format names; `None` for `ranges` and `lld-cgprofile`, which are no
    /// order (the verb writes them itself).
    pub fn link_format(self) -> Option<Format> {
        match self {
            FormatArg::List => Some(Format::List),
            FormatArg::LdScript => Some(Format::LdScript),
            FormatArg::GoldOrder => Some(Format::GoldOrder),
            FormatArg::LldOrder => Some(Format::SymbolOrder),
            FormatArg::Ranges | FormatArg::LldCgprofile => None,
        }
    }
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

/// `--markers FILE` of `order` and `fetch`: writes the markers object for `binary`'s architecture
/// (this machine's without one), padding the range to whole 2 MiB pages when `pad`, or, when
/// the linker input `needs` it and none was asked for, says so.
pub fn write_markers(
    path: Option<&Path>,
    binary: Option<&Binary>,
    needs: bool,
    pad: bool,
) -> anyhow::Result<()> {
    let Some(path) = path else {
        if needs {
            output::warn(MARKERS_ADVICE);
        }
        return Ok(());
    };
    let arch = binary.map_or_else(host_architecture, |b| b.architecture);
    let bytes = markers_object(arch, pad).context("cannot build the markers object")?;
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

/// Writes a verb's output file atomically (`hottext::os::files::write_atomic`), with the path
/// in the error.
pub fn write_output_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
