//! `hottext order`: profile in, linker input out, with the layout's figures.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::ValueEnum;
use hottext::binary::{symbol_of, Binary};
use hottext::demangle::readable;
use hottext::graph::fit::{
    fit, CodePrints, FitError, FitPolicy, FitWarning, Fitted, OtherBuildPolicy,
};
use hottext::graph::{escaped, FuncId, Graph};
use hottext::layout::auto;
use hottext::layout::metrics::{measure, place_in_order, COMPILED_ALIGNMENT};
use hottext::layout::{order, Params};
use hottext::link::{self, Alignment, EmitError, ScriptPlacement, Target, UnsafeNames};
use hottext::listing::some_of;

mod algorithm_arg;
mod report;
mod unordered;

use algorithm_arg::AlgorithmArg;
use report::{print_summary, Summary};

use super::{refuse_outputs_over_inputs, write_markers, write_output_file, FormatArg, PaddingArg};
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
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The profile written by `hottext profile`.
    profile: PathBuf,
    /// How to order the functions.
    #[arg(long, value_parser = algorithm_arg::parser(), default_value = "auto")]
    algorithm: AlgorithmArg,
    /// What to write.
    #[arg(long, value_enum, default_value_t = FormatArg::List)]
    format: FormatArg,
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
    #[arg(long)]
    align_cache_lines: bool,
    /// ld-script: this many bytes of padding before the first hot function (a multiple of 64,
    /// below 4096), for measurement only: binaries linked at several offsets let
    /// `hottext ab --simulate --offsets` tell the layout's effect from i-cache set-conflict luck.
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
    /// Use the profile even though its build-id differs from the binary's.
    #[arg(long)]
    allow_build_id_mismatch: bool,
    /// Print the figures as JSON on stdout (needs -o for the order, ranges or edges).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.json && args.output.is_none() {
        bail!("--json prints the figures on stdout; give -o FILE for the order");
    }
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
    let file = File::open(&args.profile)
        .with_context(|| format!("cannot open profile {}", args.profile.display()))?;
    let profile = Graph::read(BufReader::with_capacity(1 << 20, file))
        .with_context(|| format!("cannot read profile {}", args.profile.display()))?;

    let binary = args.binary.as_deref().map(Binary::open).transpose()?;
    // With the binary, the profile fitted to it (as `fetch` does): the binary's names, the
    // functions it lacks left out.
    let (graph, matched, addresses) = match &binary {
        Some(bin) => {
            let profile_funcs = profile.funcs().len();
            let fitted = fit_to_binary(&profile, bin, args.allow_build_id_mismatch)?;
            if fitted.graph.funcs().is_empty() {
                bail!(
                    "none of the profile's {profile_funcs} functions is in {}: the profile is from another program",
                    bin.path.display()
                );
            }
            (fitted.graph, Some(fitted.matched), Some(fitted.placement))
        }
        None => (profile, None, None),
    };

    let mut params = Params::default();
    params.c3.merge_threshold = args.merge_threshold;
    output::parameters("order", &params);
    let (ordered, name, candidates) = match args.algorithm {
        // These formats write no order of ours: any order of the functions does.
        _ if args.format.link_format().is_none() => (
            (0..graph.funcs().len()).map(FuncId::from_index).collect(),
            "none",
            None,
        ),
        AlgorithmArg::Auto => {
            let choice = auto::choose(&graph, &params, &|a| {
                if graph.funcs().len() > 100_000 {
                    eprintln!(
                        "hottext: --algorithm auto: ordering {} functions with {a}",
                        graph.funcs().len()
                    );
                }
            });
            (choice.order, choice.algorithm.name, Some(choice.candidates))
        }
        AlgorithmArg::Fixed(algorithm) => (order(&graph, algorithm, &params), algorithm.name, None),
    };

    let mut summary = Summary {
        format: args
            .format
            .to_possible_value()
            .map_or(String::new(), |v| v.get_name().to_string()),
        algorithm: None,
        params: None,
        alignment: None,
        hot: None,
        matched: matched.as_ref(),
        ordered: None,
        current: addresses.as_ref().map(|at| measure(&graph, at)),
        padding: None,
        ranges: None,
        candidates: None,
    };
    let Some(format) = args.format.link_format() else {
        return unordered::run(&args, &graph, binary.as_ref(), addresses.as_ref(), summary);
    };
    let alignment = if args.align_cache_lines {
        if !format.places_individually() {
            bail!(
                "--align-cache-lines needs --format ld-script: order files cannot align functions"
            );
        }
        Alignment::CacheLines {
            line: 64,
            max_padding: 32,
            compiled: 16,
        }
    } else {
        Alignment::AsCompiled
    };
    if args.hot_offset > 0 && !format.places_individually() {
        bail!("--hot-offset needs --format ld-script: order files cannot pad the hot range");
    }
    if args.hot_offset % 64 != 0 || args.hot_offset >= 4096 {
        bail!(
            "--hot-offset {}: give a multiple of 64 below 4096 (offsets of 4 KiB or more map to the same i-cache sets)",
            args.hot_offset
        );
    }
    let chosen_by = match args.algorithm {
        AlgorithmArg::Auto => " (chosen by --algorithm auto)",
        AlgorithmArg::Fixed(_) => "",
    };
    let origin = format!("{name} order{chosen_by} of {}", args.profile.display());
    let target = Target::Linker {
        format,
        order: &ordered,
        placement: ScriptPlacement {
            alignment,
            hot_offset: args.hot_offset,
            ..ScriptPlacement::default()
        },
        origin: &origin,
        unsafe_names: UnsafeNames::Refuse,
        binary: binary.as_ref(),
        padding: args.pad_hot_range.into(),
        text_bytes: binary.as_ref().map(Binary::code_bytes),
    };
    let written = link::write(&graph, target).map_err(|e| with_profile_line(e, &args.profile))?;
    let Some(list) = &written.hot else {
        bail!("no linker input came of the order");
    };
    if !list.split_cold.is_empty() {
        eprintln!(
            "hottext: {} parts GCC split off as unlikely stay out of the hot range: {}",
            list.split_cold.len(),
            some_of(&list.split_cold)
        );
    }
    if list.kept.is_empty() {
        bail!("no function of the profile can be placed: the only ones are parts GCC split off as unlikely");
    }
    write_output(args.output.as_deref(), &written.bytes)?;
    write_markers(
        args.markers.as_deref(),
        binary.as_ref(),
        written.needs_markers,
        written.padding.is_some_and(|p| p.padded),
    )?;

    // `auto` measured the chosen order already; the list differs from it only when parts GCC
    // split off were left out.
    let chosen = candidates
        .iter()
        .flatten()
        .find(|c| c.chosen)
        .map(|c| c.metrics.clone());
    summary.ordered = Some(match chosen {
        Some(metrics) if list.kept == ordered => metrics,
        _ => measure(
            &graph,
            &place_in_order(&graph, &list.kept, COMPILED_ALIGNMENT),
        ),
    });
    summary.algorithm = Some(name);
    summary.candidates = candidates;
    summary.params = Some(&params);
    summary.alignment = Some(alignment);
    summary.hot = Some(list.hot_text(&graph));
    summary.padding = written.padding;
    if args.json {
        output::json(&summary)?;
    } else {
        print_summary(&summary)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to the file `path` (replaced atomically), or to stdout without one.
fn write_output(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    let Some(path) = path else {
        let mut out = std::io::stdout().lock();
        return Ok(out.write_all(bytes).and_then(|()| out.flush())?);
    };
    write_output_file(path, bytes)
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
        None => anyhow::Error::new(e).context(format!("{}", profile.display())),
    }
}
