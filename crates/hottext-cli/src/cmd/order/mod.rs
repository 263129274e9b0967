//! `hottext order`: profile in, linker input out, with the layout's figures.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use hottext::binary::{symbol_of, Binary};
use hottext::demangle::readable;
use hottext::graph::fit::{
    fit, CodePrints, FitError, FitPolicy, FitWarning, Fitted, OtherBuildPolicy,
};
use hottext::graph::{escaped, Graph};
use hottext::layout::Params;
use hottext::link::{
    self, Alignment, EmitError, Format, HotList, Ordering, Origin, Request, ScriptPlacement,
    UnsafeNames,
};
use hottext::listing::some_of;

mod algorithm_arg;
mod report;

use report::Summary;
pub(crate) use report::STREAMS;

use super::{format_parser, refuse_outputs_over_inputs, write_markers, write_output, PaddingArg};
use crate::output;

/// Order the functions of a profile and write the input a linker needs
///
/// Formats: `list` (one symbol a line), `ld-script` (GNU ld or lld: -Wl,-T,FILE; defines
/// __hot_start/__hot_end and aligns them itself), `gold-order` (gold:
/// -Wl,--section-ordering-file=FILE), `lld-order` (lld: -Wl,--symbol-ordering-file=FILE
/// -Wl,--no-warn-symbol-ordering, which quiets lld's harmless warning about a name a shared
/// library exports too). The two order-file formats cannot define the markers: add
/// `--markers hot_markers.o` and link that object too. `ranges` needs --binary and writes no
/// linker input: it lists the hottest 2 MiB aligned address ranges of the binary as it is
/// (`0xSTART 0xEND` a line), for the runtime's LD_PRELOAD library (HOTTEXT_RANGES_FILE) on
/// binaries that cannot be relinked.
/// `lld-cgprofile` writes the call edges for lld to order by itself.
/// `clang-bb-sections` writes no linker input: it writes the cluster file clang 19 reads at
/// compile time, from a profile with block counts (a binary compiled with
/// -fbasic-block-address-map): each hot function keeps the blocks that ran (sampled, with at
/// least --min-block-share of its samples, or inferred by `hottext profile` from the code to
/// have run whenever a sampled one did), and clang splits the rest into NAME.cold
/// (.text.split.NAME), which every linker input leaves out of the hot range. Functions without
/// block counts stay whole. A profile with block edges (branch records: `perf record -b`)
/// also keeps every block they pass through and lays each function's kept blocks out in an
/// ext-TSP order (--block-order); without them, in the compiler's order. Then compile with
/// `clang -O2 -ffunction-sections -fbasic-block-sections=list=clusters.txt`, and order the same
/// profile for the linker as usual.
///
/// With --binary, the profile is fitted to the binary as `hottext fetch` fits it: functions are
/// found by name or alias, and by a hash of their code where the name changed; those the binary
/// lacks are named in a warning and left out. The layout's figures are shown next to those of
/// the binary's current (address) order.
///
/// Examples:
///   hottext order server.profile --binary ./server --format ld-script -o hot.ld
///   hottext order server.profile --binary ./server --format ranges -o server.ranges --json
///   hottext order server.profile --binary ./server --format lld-order -o order.txt \
///       --markers hot_markers.o --pad-hot-range always
///   hottext order server.profile --binary ./server --format clang-bb-sections -o clusters.txt
///   hottext order server.profile --format clang-bb-sections --min-split-samples 2 -o clusters.txt
///   hottext order server.profile --format clang-bb-sections --block-order original -o clusters.txt
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The profile written by `hottext profile`.
    profile: PathBuf,
    /// How to order the functions.
    #[arg(long, value_parser = algorithm_arg::parser(), default_value = "auto")]
    algorithm: Ordering,
    /// What to write.
    #[arg(long, value_parser = format_parser(), default_value = "list")]
    format: &'static Format,
    /// Write the order here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The binary the order is for: checks symbols and build-id, and scores its current layout.
    #[arg(long, value_name = "BIN")]
    binary: Option<PathBuf>,
    /// Also write the markers object (needed with gold-order and lld-order).
    #[arg(long, value_name = "FILE.o")]
    markers: Option<PathBuf>,
    /// C3: stop growing a cluster past this many bytes (the paper's page size).
    #[arg(long, value_name = "BYTES", default_value_t = Params::default().c3.merge_threshold)]
    merge_threshold: u64,
    /// ranges: list at most this many 2 MiB pages, hottest first. The default 8 is the smallest
    /// first-level 2 MiB i-TLB of current x86 CPUs; this host's CPU is not read, because the
    /// ranges run elsewhere: the runtime caps them again at its own CPU's count (CPUID) or at
    /// HOTTEXT_MAX_PAGES.
    #[arg(long, value_name = "N", default_value_t = 8)]
    max_huge_pages: usize,
    /// ld-script: start a hot function on a 64-byte cache line where that makes it span fewer
    /// lines, for at most 32 bytes of padding (the order files cannot align anything). Assumes
    /// the compiler aligned functions to 16 bytes, as GCC and Clang do at -O2 on x86-64.
    /// Without it, `--algorithm auto` applies the rule, and pads the range's start by 0-48
    /// bytes, only where its model of the L1i's sets says that pays (the summary lists each
    /// placement's modelled figure); this forces it.
    #[arg(long)]
    align_cache_lines: bool,
    /// ld-script: shift the hot functions by this many bytes after __hot_start (a multiple of
    /// 16, below 4096), for measurement: binaries linked at several multiples of 64 let
    /// `hottext ab --simulate --offsets` tell the layout's effect from i-cache set-conflict luck.
    /// `--algorithm auto`'s placement (alignment, 0-48 B of padding) comes on top, and is the
    /// same at every multiple of 64 (whole lines only rename the sets its model counts); with
    /// another algorithm the shift is the whole padding, so `--algorithm cdsort --hot-offset 48`
    /// fixes it.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    hot_offset: u64,
    /// End the hot range on a 2 MiB boundary, so that its last page is whole for the runtime
    /// however little text follows it (a range followed by less text than fills that page
    /// loses it: a program with under 2 MiB of hot code and little cold code gets no huge page
    /// at all). `auto` pads when the --binary's text would not fill the page, and always
    /// without --binary; it costs the padding in file size, under 2 MiB. ld-script aligns
    /// __hot_end; gold-order and lld-order get it from the --markers object.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = PaddingArg::Auto)]
    pad_hot_range: PaddingArg,
    /// clang-bb-sections: a block stays in its function's hot part when it has at least this
    /// share (0 to 1) of the function's block samples, or of its block edges' counts; 0 keeps
    /// every block a sample hit. Blocks the profile says ran unsampled (0 samples: inferred
    /// from the code, or passed by branch records) stay under any share.
    #[arg(long, value_name = "SHARE", default_value_t = link::DEFAULT_MIN_BLOCK_SHARE)]
    min_block_share: f64,
    /// clang-bb-sections: split only functions whose blocks drew at least this many samples
    /// (block edge counts add to them); the others stay whole. On a sparse recording (few samples per hot function) a function
    /// split from one or two samples loses blocks that ran unsampled; 2 keeps those whole.
    #[arg(long, value_name = "N", default_value_t = link::DEFAULT_MIN_SPLIT_SAMPLES)]
    min_split_samples: u64,
    /// clang-bb-sections: the order of each split function's kept blocks after its entry block.
    #[arg(long, value_enum, value_name = "ORDER", default_value_t = BlockOrderArg::ExtTsp)]
    block_order: BlockOrderArg,
    /// Use the profile even though its build-id differs from the binary's.
    #[arg(long)]
    allow_build_id_mismatch: bool,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_args(&args)?;
    let profile = read_profile(&args.profile)?;
    let binary = args.binary.as_deref().map(Binary::open).transpose()?;
    // With the binary, the profile fitted to it (as `fetch` does): the binary's names, the
    // functions it lacks left out.
    let (graph, matched, at) = match &binary {
        Some(bin) => {
            let fitted = fit_to_binary(&profile, bin, args.allow_build_id_mismatch)?;
            (fitted.graph, Some(fitted.matched), Some(fitted.placement))
        }
        None => (profile, None, None),
    };
    if args.format.splits_functions() && graph.blocks().is_empty() {
        bail!(
            "{} has no block counts, so a cluster file would split nothing: compile with clang -fbasic-block-address-map, record that build and profile it with --binary",
            args.profile.display()
        );
    }
    let mut params = Params::default();
    params.c3.merge_threshold = args.merge_threshold;
    output::parameters("order", &params);
    let functions = graph.funcs().len();
    let progress = |a: &str| {
        if functions > 100_000 {
            eprintln!("hottext: --algorithm auto: ordering {functions} functions with {a}");
        }
    };
    let source = args.profile.display().to_string();
    let request = Request {
        format: args.format,
        ordering: args.algorithm,
        params: &params,
        placement: args.align_cache_lines.then_some(ScriptPlacement {
            alignment: Alignment::CACHE_LINES,
            ..ScriptPlacement::default()
        }),
        hot_offset: args.hot_offset,
        padding: args.pad_hot_range.into(),
        unsafe_names: UnsafeNames::Refuse,
        binary: binary.as_ref(),
        at: at.as_ref(),
        origin: Origin::Profile(&source),
        max_pages: args.max_huge_pages,
        split: link::SplitRule {
            min_block_share: args.min_block_share,
            min_function_samples: args.min_split_samples,
            block_order: args.block_order.into(),
        },
        progress: &progress,
    };
    let written = link::write(&graph, &request).map_err(|e| with_profile_line(e, &args.profile))?;
    check_hot_list(written.hot.as_ref())?;
    write_output(args.output.as_deref(), &written.bytes)?;
    write_markers(args.markers.as_deref(), binary.as_ref(), written.markers)?;
    let summary = Summary::new(&request, &graph, &written, matched.as_ref());
    output::emit(&summary, args.json.mode())
}

/// Refuses, before any work, options that contradict each other or the format.
fn check_args(args: &Args) -> anyhow::Result<()> {
    args.json
        .refuse_payload_on_stdout(args.output.as_deref(), "order")?;
    let inputs: Vec<&Path> = [Some(args.profile.as_path()), args.binary.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    refuse_outputs_over_inputs(
        &[
            ("-o", args.output.as_deref()),
            ("--markers", args.markers.as_deref()),
        ],
        &inputs,
    )?;
    if !(0.0..=1.0).contains(&args.min_block_share) {
        bail!(
            "--min-block-share {}: give a share of the function's block samples from 0 to 1 (0 keeps every block that ran)",
            args.min_block_share
        );
    }
    // Only an order's placement is checked: the other formats place nothing.
    let placed_one_by_one = args.format.places_individually() || !args.format.writes_order();
    if args.align_cache_lines && !placed_one_by_one {
        bail!("--align-cache-lines needs --format ld-script: order files cannot align functions");
    }
    if args.hot_offset > 0 && !placed_one_by_one {
        bail!("--hot-offset needs --format ld-script: order files cannot pad the hot range");
    }
    if args.format.writes_order() && (args.hot_offset % 16 != 0 || args.hot_offset >= 4096) {
        bail!(
            "--hot-offset {}: give a multiple of 16 below 4096 (functions are compiled 16 B aligned, and offsets of 4 KiB or more map to the same i-cache sets)",
            args.hot_offset
        );
    }
    Ok(())
}

fn read_profile(path: &Path) -> anyhow::Result<Graph> {
    let file =
        File::open(path).with_context(|| format!("cannot open profile {}", path.display()))?;
    Graph::read(BufReader::with_capacity(1 << 20, file))
        .with_context(|| format!("cannot read profile {}", path.display()))
}

/// Names the parts GCC split off and the start-up code that stay out, and refuses an order of
/// nothing else.
fn check_hot_list(list: Option<&HotList>) -> anyhow::Result<()> {
    let Some(list) = list else {
        return Ok(());
    };
    if !list.split_cold.is_empty() {
        eprintln!(
            "hottext: {} parts GCC split off as unlikely stay out of the hot range: {}",
            list.split_cold.len(),
            some_of(&list.split_cold)
        );
    }
    if !list.startup.is_empty() {
        eprintln!(
            "hottext: {} functions of the C runtime's start-up code stay where the linker puts them (no linker input can move them): {}",
            list.startup.len(),
            some_of(&list.startup)
        );
    }
    if list.kept.is_empty() {
        bail!("no function of the profile can be placed: the only ones are parts GCC split off as unlikely and the C runtime's start-up code; record the program while it does its work");
    }
    Ok(())
}

/// The profile fitted to `binary` ([`fit`]): refused when recorded on another build unless
/// `allow_other_build`, with its warnings printed.
fn fit_to_binary(
    profile: &Graph,
    binary: &Binary,
    allow_other_build: bool,
) -> anyhow::Result<Fitted> {
    let policy = FitPolicy {
        other_build: if allow_other_build {
            OtherBuildPolicy::Warn
        } else {
            OtherBuildPolicy::Refuse
        },
        code: CodePrints::Eager,
        min_matched: 0.0,
    };
    let fitted = fit(profile, binary, policy).map_err(|e| match e {
        FitError::OtherBuild(other) => anyhow::anyhow!(
            "{other}: re-profile this build, or pass --allow-build-id-mismatch to use it anyway"
        ),
        FitError::Code { path, source } => anyhow::Error::new(source)
            .context(format!("cannot read the code of {}", path.display())),
        too_little @ FitError::TooLittleMatched { .. } => too_little.into(),
    })?;
    for warning in &fitted.warnings {
        print_fit_warning(warning);
    }
    if fitted.graph.funcs().is_empty() {
        bail!(
            "none of the profile's {} functions is in {}: the profile is from another program",
            profile.funcs().len(),
            binary.path.display()
        );
    }
    Ok(fitted)
}

/// One warning of a fit, for a person.
fn print_fit_warning(warning: &FitWarning) {
    match warning {
        FitWarning::OtherBuild(other) => output::warn(format!(
            "{other}; using it anyway (--allow-build-id-mismatch)"
        )),
        FitWarning::Unmatched(names) => {
            let unmatched: Vec<_> = names.iter().map(|n| readable(n)).collect();
            output::warn(format!(
                "{} of the profile's sampled functions are not in the binary and are left out: {}",
                names.len(),
                some_of(&unmatched)
            ));
        }
        FitWarning::Renamed(pairs) => {
            let renamed: Vec<String> = pairs
                .iter()
                .map(|(old, new)| format!("{} -> {}", readable(old), readable(new)))
                .collect();
            eprintln!(
                "hottext: {} functions found by their code under a new name: {}",
                renamed.len(),
                some_of(&renamed)
            );
        }
        FitWarning::BlocksDropped(names) => {
            let changed: Vec<_> = names.iter().map(|n| readable(n)).collect();
            output::warn(format!(
                "{} functions changed since the profile counted their basic blocks; their block counts are left out and they are kept whole: {}",
                names.len(),
                some_of(&changed)
            ));
        }
    }
}

/// A refused name, with the line of the profile that brought it in.
fn with_profile_line(e: EmitError, profile: &Path) -> anyhow::Error {
    let line = e.name().and_then(|name| {
        let text = std::fs::read_to_string(profile).ok()?;
        // A v3 profile writes the name escaped (`a%20b`): the line holds that form.
        let written = escaped(name);
        text.lines()
            .position(|l| {
                l.split_whitespace()
                    .any(|t| symbol_of(t) == name || symbol_of(t) == written)
            })
            .map(|i| i + 1)
    });
    match line {
        Some(n) => anyhow::Error::new(e).context(format!("{}, line {n}", profile.display())),
        // Not about the profile: the format lacks its binary.
        None if matches!(e, EmitError::NeedsBinary { .. }) => anyhow::Error::new(e),
        None => anyhow::Error::new(e).context(format!("{}", profile.display())),
    }
}

/// `--block-order` (`hottext::link::BlockOrder`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BlockOrderArg {
    /// Where the profile has block edges (branch records: `perf record -b`), the order that
    /// turns the most frequent transfers into fall-throughs (ext-TSP); elsewhere the compiler's
    ExtTsp,
    /// The compiler's order everywhere, as in the profiled binary
    Original,
}

impl From<BlockOrderArg> for link::BlockOrder {
    fn from(arg: BlockOrderArg) -> link::BlockOrder {
        match arg {
            BlockOrderArg::ExtTsp => link::BlockOrder::ExtTsp,
            BlockOrderArg::Original => link::BlockOrder::Original,
        }
    }
}
