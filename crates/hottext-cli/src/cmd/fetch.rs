//! `hottext fetch`: the build step. Meta file in, checked profile fetched, linker input out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::ValueEnum;
use hottext::binary::Binary;
use hottext::graph::Graph;
use hottext::layout::Params;
use hottext::link::{
    self, Format, HotText, Ordering, Origin, PaddingPlan, Request, UnsafeNames, Written,
};
use hottext::listing::some_of;
use hottext::pipeline::fetch::{fetch, FetchError, FetchSummary, Fetched};
use serde::Serialize;

use super::{
    format_parser, refuse_outputs_over_inputs, write_markers, write_output_file, PaddingArg,
};
use crate::output::{self, Report};

/// Fetch the profile a meta file names, check it, order it for BIN, write the linker input
///
/// The object is fetched by its hash and its bytes are checked against it; its size and
/// build-id must be the meta file's. The profile is fitted to BIN, which may have changed since
/// it was taken: functions are matched by name, and by a hash of their code where the name
/// changed; a profile of which less than --min-matched of the weight matches is refused as
/// stale.
///
/// BIN is the program linked without the ordering (the build links twice: once plain, once
/// with the output of this command). Formats as for `hottext order`; gold-order and lld-order
/// need --markers. `clang-bb-sections` is the compile step's input, written before there is a
/// binary: without --binary, the profile's functions are kept by their names as they are
/// (clang passes over the names and block ids the sources no longer have).
///
/// --on-missing fail (the default, as in the paper) exits with status 1 when the profile is
/// missing, corrupt, names the wrong object or is stale, and writes nothing. --on-missing warn
/// writes linker input with no hot functions instead, so the build goes on and makes a correct
/// but unoptimised binary, and says so loudly.
///
/// Examples:
///   hottext fetch --meta hottext/server.meta --binary build/server.plain --format ld-script -o build/hot.ld
///   hottext fetch --meta hottext/server.meta --format clang-bb-sections -o build/clusters.txt
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The meta file in the service's repository.
    #[arg(long, value_name = "FILE")]
    meta: PathBuf,
    /// The program as linked without the ordering, for its function names and code (not
    /// needed for clang-bb-sections, written before the compile step).
    #[arg(long, value_name = "BIN")]
    binary: Option<PathBuf>,
    /// The linker input to write.
    #[arg(long, value_parser = format_parser(), default_value = "ld-script")]
    format: &'static Format,
    /// Where to write the linker input.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Also write the markers object (needed with gold-order and lld-order).
    #[arg(long, value_name = "FILE.o")]
    markers: Option<PathBuf>,
    /// Fetch from this store instead of the one the meta file names (a mirror, a local copy).
    #[arg(long, value_name = "STORE")]
    store: Option<String>,
    /// What to do when the profile cannot be had or trusted.
    #[arg(long, value_enum, default_value_t = OnMissing::Fail)]
    on_missing: OnMissing,
    /// Refuse a profile of which less than this fraction (0 to 1) of the weight matches BIN.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    min_matched: f64,
    /// End the hot range on a 2 MiB boundary so that its last page is whole for the runtime
    /// (as `hottext order --pad-hot-range`): `auto` pads when BIN's text would not fill it.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = PaddingArg::Auto)]
    pad_hot_range: PaddingArg,
    /// C3 (one of the algorithms `auto` tries): stop growing a cluster past this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = Params::default().c3.merge_threshold)]
    merge_threshold: u64,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnMissing {
    /// Fail the build.
    Fail,
    /// Build without the profile, with a loud warning.
    Warn,
}

/// What `fetch` did: the JSON document, or lines on stdout (the linker input is in a file).
#[derive(Serialize)]
struct Summary<'a> {
    optimised: bool,
    /// Why not, when not.
    problem: Option<String>,
    #[serde(flatten)]
    fetched: Option<FetchSummary<'a>>,
    /// The hot functions the linker input lists and their bytes (`link::HotText`).
    hot: HotText,
    /// Whether the hot range is padded to whole 2 MiB pages (`link::PaddingPlan`).
    padding: Option<PaddingPlan>,
    output: &'a PathBuf,
    #[serde(skip)]
    binary: Option<&'a Path>,
}

/// docs/output.md's stream table rows of this verb: the stream its report declares.
pub(crate) const STREAMS: &[(&str, output::Stream)] = &[("fetch", <Summary as Report>::STREAM)];

impl Report for Summary<'_> {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let Some(f) = &self.fetched else {
            // Without a profile the warning on stderr said it all.
            return Ok(());
        };
        writeln!(
            out,
            "profile {} ({} samples, {} .. {}, version {})",
            f.meta.object,
            f.meta.samples,
            hottext::store::meta::time(f.meta.window_start),
            hottext::store::meta::time(f.meta.window_end),
            f.meta.binary_version
        )?;
        match self.binary {
            Some(binary) => writeln!(
                out,
                "{:.1}% of its weight matches {} ({:.1}% by name, {:.1}% by code under a new name; {} functions gone)",
                100.0 * f.matched_fraction,
                binary.display(),
                100.0 * f.matched_by_name_fraction,
                100.0 * f.matched_by_code_fraction,
                f.unmatched
            )?,
            None => writeln!(
                out,
                "no binary yet: every function kept under its profile name, unchecked"
            )?,
        }
        writeln!(
            out,
            "wrote {} ({} hot functions, {})",
            self.output.display(),
            self.hot.functions,
            output::bytes(self.hot.bytes)
        )?;
        if let Some(p) = self.padding.filter(|p| p.padded) {
            writeln!(
                out,
                "padded the hot range to {} whole 2 MiB pages ({} of file size) so the runtime can map them",
                p.huge_pages_padded,
                output::bytes(p.bytes)
            )?;
        }
        Ok(())
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_args(&args)?;
    let binary = (args.binary.as_deref())
        .map(|path| Binary::open(path).context("cannot fetch a profile for it"))
        .transpose()?;
    let (fetched, problem) = fetch_profile(&args, binary.as_ref())?;
    let mut params = Params::default();
    params.c3.merge_threshold = args.merge_threshold;
    let source = fetched
        .as_ref()
        .map(|f| format!("{} ({})", f.meta.object, args.meta.display()));
    if source.is_some() {
        output::parameters("order", &params);
    }
    let empty = Graph::default();
    // The same choice as `order --algorithm auto`, the default there. The rematched names are
    // the binary's own; one a linker input cannot carry safely (an assembler symbol with odd
    // characters) stays where it is rather than failing the build.
    let request = Request {
        format: args.format,
        ordering: Ordering::Auto,
        params: &params,
        placement: None,
        hot_offset: 0,
        padding: args.pad_hot_range.into(),
        unsafe_names: UnsafeNames::LeaveOut,
        binary: binary.as_ref(),
        at: None,
        origin: source.as_deref().map_or(Origin::NoProfile, Origin::Profile),
        max_pages: 0,
        split: link::SplitRule::default(),
        progress: &|_| (),
    };
    let graph = fetched.as_ref().map_or(&empty, |f| &f.graph);
    let written = link::write(graph, &request)?;
    if let Some(algorithm) = written.algorithm {
        eprintln!(
            "hottext: ordered with {} (chosen by --algorithm auto's model)",
            algorithm.name
        );
    }
    warn_unsafe_names(&written);
    write_output_file(&args.output, &written.bytes)?;
    write_markers(args.markers.as_deref(), binary.as_ref(), written.markers)?;
    let summary = Summary {
        optimised: fetched.is_some(),
        problem,
        fetched: fetched.as_ref().map(Fetched::summary),
        hot: written.hot_text,
        padding: written.padding,
        output: &args.output,
        binary: args.binary.as_deref(),
    };
    output::emit(&summary, args.json.mode())
}

/// Refuses, before any work, options out of range and outputs over inputs.
fn check_args(args: &Args) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&args.min_matched) {
        bail!(
            "--min-matched {} is not a fraction between 0 and 1 (0.5 for half the weight)",
            args.min_matched
        );
    }
    refuse_outputs_over_inputs(
        &[
            ("-o", Some(&args.output)),
            ("--markers", args.markers.as_deref()),
        ],
        &[Some(args.meta.as_path()), args.binary.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>(),
    )?;
    if !args.format.writes_order() {
        bail!("fetch writes an order; for ranges or lld-cgprofile run `hottext order --format …` on the fetched profile");
    }
    if args.binary.is_none() && !args.format.splits_functions() {
        bail!(
            "--format {} needs --binary BIN, the program linked without the ordering: its names and code are what the profile is fitted to",
            args.format.name
        );
    }
    Ok(())
}

/// The profile fitted to `binary`; without one, under `--on-missing warn`, why not.
fn fetch_profile(
    args: &Args,
    binary: Option<&Binary>,
) -> anyhow::Result<(Option<Fetched>, Option<String>)> {
    match fetch(&args.meta, args.store.as_deref(), binary, args.min_matched) {
        Ok(f) => Ok((Some(f), None)),
        Err(e) if e.profile_unavailable() && args.on_missing == OnMissing::Warn => {
            shout(&e);
            Ok((None, Some(e.to_string())))
        }
        Err(e) if e.profile_unavailable() => Err(output::failed(format!(
            "cannot use the profile named by {}: {e}\n\
             the build stops here (--on-missing fail); --on-missing warn builds an unoptimised binary instead",
            args.meta.display()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Names the functions left where the compiler put them because their names are unsafe.
fn warn_unsafe_names(written: &Written) {
    let Some(list) = written.hot.as_ref().filter(|l| !l.unsafe_names.is_empty()) else {
        return;
    };
    // Quoted and escaped: a name from a store must not drive the build log's terminal.
    let quoted: Vec<String> = list.unsafe_names.iter().map(|n| format!("{n:?}")).collect();
    output::warn(format!(
        "{} functions have names a linker input cannot carry safely and stay out of the hot range: {}",
        quoted.len(),
        some_of(&quoted)
    ));
}

/// The unoptimised-build warning: several lines, so it stands out in a build log.
fn shout(e: &FetchError) {
    let rule = "=".repeat(72);
    output::warn(&rule);
    output::warn(format!("BUILDING WITHOUT THE HOT-TEXT PROFILE: {e}"));
    output::warn("the binary will be correct but UNOPTIMISED: its hot range holds no function");
    output::warn("(--on-missing warn; the default, fail, stops the build instead)");
    output::warn(&rule);
}
