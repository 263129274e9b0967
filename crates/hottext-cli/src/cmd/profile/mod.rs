//! `hottext profile`: perf.data in, the binary's call graph out, with what was read.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, Context};
use hottext::binary::Binary;
use hottext::graph::Graph;
use hottext::os::proc::Pid;
use hottext::profile::{
    read, MatchedBy, Options, ProfileError, SampleKind, Stats, NO_EDGE_WARNING,
};
use indicatif::{ProgressBar, ProgressStyle};

use super::{pid_arg, refuse_outputs_over_inputs, write_output_file};
use crate::output;

mod events;
mod summary;
mod top;

use summary::Summary;

/// Files smaller than this read in well under a second: no progress bar.
const PROGRESS_FROM_BYTES: u64 = 64 << 20;

/// Build the call graph of one binary from a perf.data file
///
/// Keeps the samples that fall in BIN (matched by build-id, else by path, else by file name and
/// code, and says which), maps their addresses to BIN's functions (removing a PIE's load bias),
/// and writes the profile text. Call stacks (frame pointers or DWARF) give an edge from the
/// caller frame to the innermost frame, following tail calls through the code; branch records
/// give one per call or tail jump; plain samples get edges inferred from the direct calls.
/// Samples outside BIN, addresses without a symbol, and records perf lost are counted and shown.
///
/// Every event with the same kind of call information is used (both PMUs of a hybrid CPU);
/// branch records win over stacks. `--events` lists the file's events and what their samples
/// carry, without a binary.
///
/// The report also says where the CPU of the binary's processes went: the binary itself (the
/// most a layout of it can speed up), the kernel, each library; --top N lists the hottest
/// functions. The shares go into the profile's header (`process-samples`, `cpu-samples`).
///
/// When BIN was built by clang with -fbasic-block-address-map, each sample is also counted in
/// its basic block (`block` lines, profile v4), and the report says how much of the sampled
/// functions' bytes ran. With branch records (`perf record -b`), the jumps and fall-throughs
/// between a function's blocks are written too (`block-edge` lines, profile v5).
///
/// Example:
///   hottext profile perf.data --binary ./server -o server.profile
///   hottext profile perf.data --binary ./server -o server.profile --top 20
///   hottext profile perf.data --events
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The perf.data written by `hottext record` (or `perf record -g`; `perf record -o -`
    /// saved to a file is read too).
    perf_data: PathBuf,
    /// The executable whose functions to profile: the one that was recorded, with its symbols.
    #[arg(long, value_name = "BIN", required_unless_present = "events")]
    binary: Option<PathBuf>,
    /// List the file's events instead: name, samples, what they carry (fp stack, dwarf
    /// regs+stack, branch records and their filter, plain samples) and which ones a profile uses.
    #[arg(long, conflicts_with_all = ["binary", "output", "pid", "allow_build_id_mismatch"])]
    events: bool,
    /// Write the profile here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Keep only the samples of this process (the recording may hold every process on its CPUs).
    #[arg(long, value_name = "PID", value_parser = pid_arg())]
    pid: Option<Pid>,
    /// Use mappings of a file named like BIN whose build-id differs from BIN's.
    #[arg(long)]
    allow_build_id_mismatch: bool,
    /// A stack sample that tail calls make ambiguous (a function shared by several that one
    /// function jumps to) gives no edge, instead of being shared among its possible callers by
    /// their own samples.
    #[arg(long)]
    drop_ambiguous_callers: bool,
    /// Also list the N functions with the most samples of their own, demangled, as shares of
    /// the binary's samples and of its processes' (as `perf report --no-children` does).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] = &[
    ("profile", summary::STREAM),
    ("profile --events", events::STREAM),
];

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::metadata(&args.perf_data)
        .with_context(|| format!("cannot read {}", args.perf_data.display()))?
        .len();
    let Some(binary_path) = &args.binary else {
        return events::list(&args, bytes);
    };
    (args.json).refuse_payload_on_stdout(args.output.as_deref(), "profile")?;
    refuse_outputs_over_inputs(
        &[("-o", args.output.as_deref())],
        &[&args.perf_data, binary_path],
    )?;
    let binary = Binary::open(binary_path).context("cannot profile")?;
    let bar = progress_bar(bytes);
    let opts = Options {
        allow_build_id_mismatch: args.allow_build_id_mismatch,
        pid: args.pid,
        drop_ambiguous_callers: args.drop_ambiguous_callers,
    };
    let started = Instant::now();
    let result = read(&args.perf_data, &binary, &opts, &mut |done, _| {
        bar.set_position(done)
    });
    bar.finish_and_clear();
    let (graph, stats) = result.map_err(explain)?;
    let read_seconds = started.elapsed().as_secs_f64();
    // perf.data's own rate setting is not read; the rate the samples show is.
    output::parameters(
        "profile",
        &serde_json::json!({
            "event": stats.event,
            "sample_kind": stats.sample_kind,
            "samples_per_second": stats.samples as f64 / stats.seconds.max(1e-9),
            "pid": args.pid,
            "allow_build_id_mismatch": args.allow_build_id_mismatch,
        }),
    );

    match &args.output {
        Some(path) => {
            let mut bytes = Vec::new();
            graph.write(&mut bytes)?;
            write_output_file(path, &bytes)?;
        }
        None => graph.write(std::io::stdout().lock())?,
    }

    let summary = Summary {
        perf_data: &args.perf_data,
        binary: binary_path,
        bytes,
        read_seconds,
        functions: graph.funcs().len(),
        edges: graph.calls().len(),
        unresolved_fraction: stats.unresolved_fraction(),
        block_coverage: stats.block_map.then(|| graph.block_coverage()),
        top: args.top.map(|n| top::top(&graph, &stats.cpu, n)),
        stats: &stats,
    };
    warn_about(&stats, &graph, binary_path);
    output::emit(&summary, args.json.mode())
}

fn progress_bar(bytes: u64) -> ProgressBar {
    if bytes < PROGRESS_FROM_BYTES {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(bytes);
    let style = ProgressStyle::with_template("{spinner} reading {bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Adds what the user can do about an error.
fn explain(err: ProfileError) -> anyhow::Error {
    match err {
        ProfileError::BuildIdMismatch { .. } => {
            anyhow!("{err}; re-record this build, or pass --allow-build-id-mismatch to use the other build's samples")
        }
        err => anyhow::Error::new(err),
    }
}

fn warn_about(stats: &Stats, graph: &Graph, binary: &std::path::Path) {
    let bin = binary.display();
    if stats.matched_by.contains(&MatchedBy::Path) {
        output::warn(format!(
            "perf.data holds no build-id for {bin} (or {bin} has none): its samples were matched by path only"
        ));
    }
    if stats.matched_by.contains(&MatchedBy::NameAndCode) {
        output::warn(format!(
            "perf.data holds no build-id for {bin} (or {bin} has none): its samples were matched by file name, \
             at another path whose file has the same code"
        ));
    }
    if stats.matched_by.contains(&MatchedBy::NameOnly) {
        output::warn(format!(
            "perf.data holds no build-id for {bin} (or {bin} has none): its samples were matched by file name only; \
             the recorded path is not on this machine, so the code could not be compared: make sure it is the same build"
        ));
    }
    for other in &stats.other_builds {
        let what = if stats.matched_by.contains(&MatchedBy::MismatchAllowed) {
            "used anyway"
        } else {
            "left out"
        };
        let differs = if other.build_id.is_empty() {
            "other code than".to_string()
        } else {
            format!("build-id {}, not", other.build_id)
        };
        output::warn(format!("{} has {differs} {bin}'s: {what}", other.path));
    }
    if !stats.unused_events.is_empty() {
        let unused: Vec<String> = (stats.unused_events.iter())
            .map(|e| format!("{} ({} samples: {})", e.name, e.samples, e.why))
            .collect();
        output::warn(format!("events not used: {}", unused.join("; ")));
    }
    if let Some(problem) = &stats.block_map_problem {
        output::warn(format!(
            "{bin}'s basic-block map (.llvm_bb_addr_map) cannot be used, so the profile has no block counts: {problem}"
        ));
    }
    if stats.lost_samples > 0 {
        output::warn(format!(
            "perf lost {} samples (its buffer overflowed): the profile is thinner but not biased by it; \
             record at a lower frequency (-F) to avoid it",
            stats.lost_samples
        ));
    }
    if stats.unreadable_records > 0 {
        output::warn(format!(
            "{} records could not be read and were skipped",
            stats.unreadable_records
        ));
    }
    let unknown = stats.calls_caller_unknown as f64 / stats.samples_in_binary.max(1) as f64;
    if unknown > NO_EDGE_WARNING {
        output::warn(format!(
            "{:.0}% of {bin}'s samples were taken where the function had no frame of its own and \
             its caller was entered through a pointer: they give no call edge",
            100.0 * unknown
        ));
    }
    let undecided = stats.calls_tail_undecided as f64 / stats.samples_in_binary.max(1) as f64;
    if undecided > NO_EDGE_WARNING {
        output::warn(format!(
            "{:.0}% of {bin}'s samples came through tail calls (jumps to another function) that \
             the code cannot follow (an indirect jump, too many chains, or --drop-ambiguous-callers): \
             they give no call edge",
            100.0 * undecided
        ));
    }
    if stats.branches_unclassified > 0 {
        output::warn(format!(
            "{} branch records could not be told apart as calls or jumps (their filter admits \
             both, perf saved no branch type, and {bin} is not x86-64): no edge; record with \
             `-j any_call` or `-j any,save_type`",
            stats.branches_unclassified
        ));
    }
    if graph.calls().is_empty() {
        let why = match stats.sample_kind {
            SampleKind::Stack => format!(
                "was {bin} built without frame pointers? (build with -fno-omit-frame-pointer, or record with hottext record, which uses DWARF stacks then)"
            ),
            SampleKind::Dwarf => format!("could {bin}'s CFI (.eh_frame) not unwind its samples? (see 'not unwound')"),
            SampleKind::Branch => "the branch records hold no call between two of its functions".into(),
            SampleKind::Plain => format!("{bin}'s sampled functions have no direct caller that the code shows"),
        };
        output::warn(format!("no call edge was found: {why}"));
    }
}
