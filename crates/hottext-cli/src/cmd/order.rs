//! `hottext order`: profile in, linker input out, with the layout's figures.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::ValueEnum;
use hottext::binary::{symbol_of, Binary, HUGE_PAGE};
use hottext::graph::{FuncId, Graph};
use hottext::layout::auto::{self, Candidate};
use hottext::layout::metrics::{
    hot_ranges, measure, place_in_order, Metrics, Placement, COMPILED_ALIGNMENT,
};
use hottext::layout::{order, Algorithm, Params};
use hottext::link::{
    emit, is_split_cold_part, markers_object, write_call_graph_profile, Alignment, EmitError,
    Entry, ScriptPlacement,
};
use serde::Serialize;

use super::FormatArg;
use crate::output;

/// Order the functions of a profile and write the input a linker needs
///
/// Formats: `list` (one symbol a line), `ld-script` (GNU ld or lld: -Wl,-T,FILE; defines
/// __hot_start/__hot_end and aligns them itself), `gold-order` (gold:
/// -Wl,--section-ordering-file=FILE), `lld-order` (lld: -Wl,--symbol-ordering-file=FILE). The
/// two order-file formats cannot define the markers: add `--markers hot_markers.o` and link that
/// object too. `ranges` needs --binary and writes no linker input: it lists the hottest 2 MiB
/// aligned address ranges of the binary as it is (`0xSTART 0xEND` a line), for the runtime's
/// LD_PRELOAD library (HOTTEXT_RANGES_FILE) on binaries that cannot be relinked.
/// `lld-cgprofile` writes the call edges for lld to order by itself.
///
/// With --binary, profile functions the binary lacks are named in a warning and left out, and the
/// layout's figures are shown next to those of the binary's current (address) order.
///
/// Examples:
///   hottext order server.profile --binary ./server --format ld-script -o hot.ld
///   hottext order server.profile --binary ./server --format ranges -o server.ranges --json
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The profile written by `hottext profile`.
    profile: PathBuf,
    /// How to order the functions.
    #[arg(long, value_enum, default_value_t = AlgorithmArg::Auto)]
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
    /// Use the profile even though its build-id differs from the binary's.
    #[arg(long)]
    allow_build_id_mismatch: bool,
    /// Print the figures as JSON on stdout (needs -o for the order, ranges or edges).
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum AlgorithmArg {
    /// Order with cdsort, c3 and ph, keep the layout the profile's model scores best (the
    /// share of call weight that leaves its 4 KiB page, then the modelled L1i overflow)
    Auto,
    /// Call-chain clustering (hfsort)
    C3,
    /// Pettis-Hansen
    Ph,
    /// Cache-directed sort (LLVM's CDSort), with the profile's call sites
    Cdsort,
}

/// The JSON document. `ranges` and `lld-cgprofile` write no order of ours: they have no
/// algorithm, params or ordered figures, and `ranges` has its ranges.
#[derive(Serialize)]
struct Summary<'a> {
    format: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    algorithm: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Params>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alignment: Option<Alignment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    functions_ordered: Option<usize>,
    functions_missing_in_binary: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ordered: Option<Metrics>,
    current: Option<Metrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ranges: Option<Vec<Range>>,
    /// With `--algorithm auto`: every algorithm's modelled layout, the chosen one marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    candidates: Option<Vec<Candidate>>,
}

#[derive(Serialize)]
struct Range {
    start: u64,
    end: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.json && args.output.is_none() {
        bail!("--json prints the figures on stdout; give -o FILE for the order");
    }
    let file = File::open(&args.profile)
        .with_context(|| format!("cannot open profile {}", args.profile.display()))?;
    let graph = Graph::read(BufReader::with_capacity(1 << 20, file))
        .with_context(|| format!("cannot read profile {}", args.profile.display()))?;

    let binary = args.binary.as_deref().map(Binary::open).transpose()?;
    if let Some(bin) = &binary {
        check_build_id(&graph, bin, args.allow_build_id_mismatch)?;
    }

    let mut params = Params::default();
    params.c3.merge_threshold = args.merge_threshold;
    output::parameters("order", &params);
    let (ordered, name, candidates) = match args.algorithm {
        // These formats write no order of ours: any order of the functions does.
        _ if args.format.link_format().is_none() => {
            ((0..graph.funcs.len() as FuncId).collect(), "none", None)
        }
        AlgorithmArg::Auto => {
            let choice = auto::choose(&graph, &params, &mut |a| {
                if graph.funcs.len() > 100_000 {
                    eprintln!(
                        "hottext: --algorithm auto: ordering {} functions with {a}",
                        graph.funcs.len()
                    );
                }
            });
            (
                choice.order,
                choice.algorithm.name(),
                Some(choice.candidates),
            )
        }
        AlgorithmArg::C3 => (order(&graph, Algorithm::C3, &params), "c3", None),
        AlgorithmArg::Ph => (order(&graph, Algorithm::PettisHansen, &params), "ph", None),
        AlgorithmArg::Cdsort => (order(&graph, Algorithm::Cdsort, &params), "cdsort", None),
    };

    // Functions the binary lacks are named, then left out of the linker input.
    // So are the parts GCC split off as unlikely (`foo.cold`): see `is_split_cold_part`.
    let addresses = binary.as_ref().map(|b| addresses_by_name(&graph, b));
    let mut missing = Vec::new();
    let mut split_cold = Vec::new();
    let mut kept: Vec<FuncId> = Vec::with_capacity(ordered.len());
    for &f in &ordered {
        let name = graph.funcs[f as usize].name.as_str();
        match &addresses {
            Some(at) if at[f as usize].is_none() => missing.push(name),
            _ if is_split_cold_part(name) => split_cold.push(name),
            _ => kept.push(f),
        }
    }
    if kept.is_empty() {
        bail!(
            "none of the profile's {} functions is in {}: the profile is from another program",
            graph.funcs.len(),
            args.binary.as_deref().unwrap_or(&args.profile).display()
        );
    }
    if !missing.is_empty() {
        output::warn(format!(
            "{} of the profile's {} functions are not in the binary and are left out: {}",
            missing.len(),
            graph.funcs.len(),
            output::some_of(&missing, 8)
        ));
    }

    if !split_cold.is_empty() {
        eprintln!(
            "hottext: {} parts GCC split off as unlikely stay out of the hot range: {}",
            split_cold.len(),
            output::some_of(&split_cold, 8)
        );
    }

    let mut summary = Summary {
        format: args
            .format
            .to_possible_value()
            .map_or(String::new(), |v| v.get_name().to_string()),
        algorithm: None,
        params: None,
        alignment: None,
        functions_ordered: None,
        functions_missing_in_binary: missing,
        ordered: None,
        current: addresses.as_ref().map(|at| measure(&graph, at)),
        ranges: None,
        candidates: None,
    };
    let Some(format) = args.format.link_format() else {
        if args.format == FormatArg::LldCgprofile {
            write_cgprofile(&args, &graph, addresses.as_ref())?;
        } else {
            summary.ranges = Some(write_ranges(
                &args,
                &graph,
                binary.as_ref(),
                addresses.as_ref(),
            )?);
        }
        if args.json {
            output::json(&summary)?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    // With the binary, only names it has reach the linker: an alias the profile claims but
    // the binary lacks is dropped, whatever it says.
    let known: Option<foldhash::HashSet<&str>> = binary.as_ref().map(|b| {
        b.functions
            .iter()
            .flat_map(|f| std::iter::once(&f.name).chain(&f.aliases))
            .map(|n| symbol_of(n))
            .collect()
    });
    let aliases: Vec<Vec<String>> = kept
        .iter()
        .map(|&f| {
            let all = &graph.funcs[f as usize].aliases;
            match &known {
                Some(known) => all
                    .iter()
                    .filter(|a| known.contains(symbol_of(a)))
                    .cloned()
                    .collect(),
                None => all.clone(),
            }
        })
        .collect();
    let entries: Vec<Entry> = kept
        .iter()
        .zip(&aliases)
        .map(|(&f, aliases)| Entry {
            aliases,
            ..Entry::from(&graph.funcs[f as usize])
        })
        .collect();
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
    let placement = ScriptPlacement {
        alignment,
        hot_offset: args.hot_offset,
    };
    let chosen_by = match args.algorithm {
        AlgorithmArg::Auto => " (chosen by --algorithm auto)",
        _ => "",
    };
    let origin = format!("{name} order{chosen_by} of {}", args.profile.display());
    // Written in memory first, as fetch does: a refused name leaves no file behind.
    let mut text = Vec::new();
    emit(format, &entries, placement, &origin, &mut text)
        .map_err(|e| with_profile_line(e, &args.profile))?;
    write_output(args.output.as_deref(), |out| out.write_all(&text))?;
    if let Some(path) = &args.markers {
        let arch = binary.as_ref().map_or(host_arch(), |b| b.architecture);
        let bytes = markers_object(arch).context("cannot build the markers object")?;
        std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    } else if format.needs_markers_object() {
        output::warn("this format cannot define __hot_start/__hot_end: add --markers hot_markers.o and link that object");
    }

    summary.algorithm = Some(name);
    summary.candidates = candidates;
    summary.params = Some(&params);
    summary.alignment = Some(alignment);
    summary.functions_ordered = Some(kept.len());
    summary.ordered = Some(measure(
        &graph,
        &place_in_order(&graph, &kept, COMPILED_ALIGNMENT),
    ));
    if args.json {
        output::json(&summary)?;
    } else {
        print_summary(&summary)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--format lld-cgprofile`: the call edges among the functions the binary has (all of them
/// without --binary), for lld to order by itself.
fn write_cgprofile(args: &Args, graph: &Graph, at: Option<&Placement>) -> anyhow::Result<()> {
    let keep = |f: FuncId| at.is_none_or(|at| at[f as usize].is_some());
    // Written in memory first: a refused name must not leave a truncated file lld would take.
    let mut text = Vec::new();
    write_call_graph_profile(graph, keep, &mut text)?;
    write_output(args.output.as_deref(), |out| out.write_all(&text))
}

/// Runs `write` on the file `path` (created), or on stdout without one.
fn write_output(
    path: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let Some(path) = path else {
        return Ok(write(&mut std::io::stdout().lock())?);
    };
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    write(&mut out)
        .and_then(|()| out.flush())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `--format ranges`: the binary's own hottest 2 MiB pages, for the LD_PRELOAD runtime.
fn write_ranges(
    args: &Args,
    graph: &Graph,
    binary: Option<&Binary>,
    at: Option<&Placement>,
) -> anyhow::Result<Vec<Range>> {
    let (Some(binary), Some(at)) = (binary, at) else {
        bail!("--format ranges lists addresses of a binary: give --binary BIN");
    };
    let ranges = hot_ranges(graph, at, args.max_huge_pages);
    let mut text = String::new();
    // The preload library refuses a ranges file made for another build.
    if let Some(id) = binary.build_id_hex() {
        text.push_str(&format!("# build-id: {id}\n"));
    }
    for (start, end) in &ranges {
        text.push_str(&format!("{start:#x} {end:#x}\n"));
    }
    write_output(args.output.as_deref(), |out| out.write_all(text.as_bytes()))?;
    let pages: u64 = ranges.iter().map(|(s, e)| (e - s) / HUGE_PAGE).sum();
    if !args.json {
        eprintln!(
            "hottext: {pages} hot 2 MiB pages in {} ranges",
            ranges.len()
        );
    }
    Ok(ranges
        .into_iter()
        .map(|(start, end)| Range { start, end })
        .collect())
}

fn check_build_id(graph: &Graph, binary: &Binary, allow: bool) -> anyhow::Result<()> {
    let (Some(theirs), Some(ours)) = (graph.header("build-id"), binary.build_id_hex()) else {
        return Ok(());
    };
    if theirs == ours {
        return Ok(());
    }
    let msg = format!(
        "the profile was taken from build-id {theirs}, but {} has build-id {ours}",
        binary.path.display()
    );
    if allow {
        output::warn(format!(
            "{msg}; using it anyway (--allow-build-id-mismatch)"
        ));
        Ok(())
    } else {
        bail!("{msg}: re-profile this build, or pass --allow-build-id-mismatch to use it anyway")
    }
}

/// Where each profile function sits in the binary now, matched by name or alias.
fn addresses_by_name(graph: &Graph, binary: &Binary) -> Placement {
    let mut by_name: foldhash::HashMap<&str, u64> = Default::default();
    for f in &binary.functions {
        by_name.insert(&f.name, f.start.0);
        for a in &f.aliases {
            by_name.entry(a).or_insert(f.start.0);
        }
    }
    graph
        .funcs
        .iter()
        .map(|f| {
            std::iter::once(&f.name)
                .chain(&f.aliases)
                .find_map(|n| by_name.get(n.as_str()).copied())
        })
        .collect()
}

/// A refused name, with the line of the profile that brought it in.
fn with_profile_line(e: EmitError, profile: &Path) -> anyhow::Error {
    let line = e.name().and_then(|name| {
        let text = std::fs::read_to_string(profile).ok()?;
        text.lines()
            .position(|l| l.split_whitespace().any(|t| symbol_of(t) == name))
            .map(|i| i + 1)
    });
    match line {
        Some(n) => anyhow::Error::new(e).context(format!("{}, line {n}", profile.display())),
        None => anyhow::Error::new(e).context(format!("{}", profile.display())),
    }
}

fn host_arch() -> object::Architecture {
    if cfg!(target_arch = "aarch64") {
        object::Architecture::Aarch64
    } else {
        object::Architecture::X86_64
    }
}

/// A table row: its label and how to show a layout's figure.
type Row = (&'static str, fn(&Metrics) -> String);

fn print_summary(s: &Summary) -> anyhow::Result<()> {
    // The order itself may be on stdout, so the figures go to stderr.
    let mut err = std::io::stderr().lock();
    let algorithm = s.algorithm.unwrap_or("?");
    writeln!(
        err,
        "hottext: ordered {} functions with {algorithm}",
        s.functions_ordered.unwrap_or(0)
    )?;
    let rows: [Row; 9] = [
        ("hot functions", |m| m.hot_functions.to_string()),
        ("hot bytes", |m| output::bytes(m.hot_bytes)),
        ("hot span", |m| output::bytes(m.hot_span_bytes)),
        ("4 KiB pages for 99% of samples", |m| {
            m.pages_4k_99.to_string()
        }),
        ("2 MiB pages for 99% of samples", |m| {
            m.pages_2m_99.to_string()
        }),
        ("call weight within 64 B", |m| {
            format!("{:.1}%", 100.0 * m.calls_within_64b)
        }),
        ("call weight on its 4 KiB page", |m| {
            format!("{:.1}%", 100.0 * m.calls_within_4k)
        }),
        ("call weight within 2 MiB", |m| {
            format!("{:.1}%", 100.0 * m.calls_within_2m)
        }),
        ("weighted call distance", |m| {
            m.weighted_call_distance.to_string()
        }),
    ];
    if let Some(candidates) = &s.candidates {
        print_candidates(&mut err, candidates)?;
    }
    let Some(ordered) = &s.ordered else {
        return Ok(());
    };
    match &s.current {
        Some(cur) => {
            writeln!(err, "  {:<32} {:>14} {:>14}", "", "current", algorithm)?;
            for (label, f) in rows {
                writeln!(err, "  {label:<32} {:>14} {:>14}", f(cur), f(ordered))?;
            }
        }
        None => {
            for (label, f) in rows {
                writeln!(err, "  {label:<32} {:>14}", f(ordered))?;
            }
        }
    }
    Ok(())
}

/// `--algorithm auto`'s table: each algorithm's modelled figures, the chosen one marked.
fn print_candidates(err: &mut impl Write, candidates: &[Candidate]) -> std::io::Result<()> {
    writeln!(
        err,
        "  --algorithm auto (modelled):  {:>18} {:>14} {:>16}",
        "calls leaving page", "L1i overflow", "4 KiB pages 99%"
    )?;
    for c in candidates {
        let mark = if c.chosen { "chosen" } else { "" };
        writeln!(
            err,
            "  {:>8} {:<20} {:>18} {:>14} {:>16}",
            mark,
            c.algorithm,
            format!("{:.1}%", 100.0 * c.score),
            format!("{:.2}%", 100.0 * c.metrics.icache_overflow),
            c.metrics.pages_4k_99
        )?;
    }
    Ok(())
}
