//! From a running program to a call graph: [`record`] runs perf, [`read`] reads perf.data.
//!
//! [`read`] keeps the samples that fall in one binary (matched by build-id, else by path, and
//! says which), maps their addresses to the binary's functions through the mmap records (so a
//! PIE's load bias is removed), and builds the weighted call graph of section 4 of the hfsort
//! paper ("Optimizing Function Placement for Large-Scale Data-Center Applications"):
//!
//! - stack samples (`perf record --call-graph fp`): a self sample for the innermost user frame,
//!   and a call edge from the frame below it (return address − 1) to it; lower frames are not
//!   used, as they distort the weights. Where the innermost function had no frame of its own (at
//!   its entry or `ret`, or a leaf built without one) the frame below is its caller's caller;
//!   on x86-64 the real caller is recovered from the direct call that entered it. Tail calls
//!   (a `jmp` to another function, which leaves no frame) are followed through the code from
//!   the call that the return address names, so the edge comes from the function that jumped;
//! - user stacks (`perf record --call-graph dwarf`): the same two frames, the return address
//!   found by one step of unwinding through the binary's CFI (`unwind.rs`) from the sampled
//!   registers and stack copy. CFI is exact at every instruction, so no frame repair is needed;
//!   tail calls are followed as for frame pointers;
//! - branch records (`perf record -j any_call`, or `-b` / `-j any` with any filter): a self
//!   sample for the sampled address, and one unit of weight for each record whose source and
//!   target are both in the binary and which is a call, or a jump to another function's entry
//!   (a tail call). Jumps within a function and returns are counted, not edges. What a record
//!   is comes from the branch filter (calls only), perf's saved branch type, or the code;
//! - plain samples (`perf record` without `-g`): a self sample for the sampled address, and
//!   edges inferred from the binary's direct calls (`inferred.rs`), marked so in the header.
//!
//! Nothing is dropped silently: [`Stats`] counts samples outside the binary, addresses no symbol
//! covers, records perf lost and records we could not read.
//!
//! ```no_run
//! use std::path::Path;
//! use hottext::binary::Binary;
//! use hottext::profile::{read, Options};
//!
//! let binary = Binary::open(Path::new("./server"))?;
//! let (graph, stats) = read(Path::new("perf.data"), &binary, &Options::default(), &mut |_, _| {})?;
//! println!("{} of {} samples in the binary", stats.samples_in_binary, stats.samples);
//! graph.write(std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod apportion;
mod block_edges;
mod branch_filter;
mod branch_records;
mod call_graph;
mod callers;
pub(crate) mod code;
mod dominators;
mod events;
mod frames;
mod function_index;
mod inferred;
mod mappings;
mod mmap_record;
mod perf_bytes;
mod perf_file;
mod perf_header;
mod perf_sections;
mod pipe_header;
mod ran_blocks;
pub mod record;
mod record_budget;
mod record_guard;
mod resolve;
mod sample;
pub mod shares;
mod tally;
mod unwind;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::binary::Binary;
use crate::graph::Graph;
use crate::os::proc::Pid;

pub use code::frame_pointer_share;
pub use events::{events, Carries, Event, UnusedEvent};
pub use mappings::MatchedBy;
pub use shares::CpuShares;

/// Samples without an edge (a frameless function entered through a pointer, a tail call the code
/// cannot follow) beyond this share of the binary's samples deserve a warning.
pub const NO_EDGE_WARNING: f64 = 0.05;

/// Header keys of the profiles [`read`] makes, beside the graph format's own.
pub mod header {
    pub use crate::graph::counted_header::{
        CPU_SAMPLES, PROCESS_SAMPLES, TAIL_CALL_SHARED, TAIL_CALL_UNDECIDED, TAIL_CALL_WEIGHT,
    };
    /// What the edges come from: [`super::SampleKind`].
    pub(crate) const SAMPLE_KIND: &str = "sample-kind";
    /// Present when the edges were inferred from the code (a recording without stacks).
    pub(crate) const EDGES: &str = "edges";
}

/// Choices for [`read`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Use mappings of a file with the binary's name but another build-id.
    pub allow_build_id_mismatch: bool,
    /// Keep only the samples of this process (a system-wide recording holds every process).
    pub pid: Option<Pid>,
    /// A stack sample that several chains of tail jumps could explain (a function shared by
    /// several that one function jumps to) gives no edge, instead of being shared among the
    /// candidate callers by their own samples.
    pub drop_ambiguous_callers: bool,
}

/// What the call edges come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleKind {
    /// Call stacks (frame pointers): top two frames.
    #[default]
    Stack,
    /// Branch records (LBR): call entries.
    Branch,
    /// Samples without stacks or branch records (`perf record` without `-g`): edges inferred
    /// from the binary's direct calls.
    Plain,
    /// User registers and stack copies (`--call-graph dwarf`), unwound one frame by the
    /// binary's CFI: top two frames, exact at every instruction.
    Dwarf,
}

impl SampleKind {
    /// What perf records for it, as `hottext record` says it.
    pub fn description(self) -> &'static str {
        match self {
            SampleKind::Stack => "call stacks by frame pointers",
            SampleKind::Dwarf => "call stacks by DWARF unwinding",
            SampleKind::Branch => "branch records of calls (LBR)",
            SampleKind::Plain => "samples without stacks (edges inferred from the code)",
        }
    }
}

impl fmt::Display for SampleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SampleKind::Stack => "stack",
            SampleKind::Branch => "branch",
            SampleKind::Plain => "plain",
            SampleKind::Dwarf => "dwarf",
        })
    }
}

/// What [`read`] found, for the user to judge the profile by.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// The sampled events the graph is built from, joined by ", " (one, unless the file has
    /// several events with the same kind of call information, as on a hybrid CPU).
    pub event: String,
    /// What the call edges come from.
    pub sample_kind: SampleKind,
    /// Records in the file, of every type.
    pub records: u64,
    /// Samples of the events in `event`, in every process.
    pub samples: u64,
    /// Samples whose innermost user frame is in the binary.
    pub samples_in_binary: u64,
    /// Of those, samples at an address no function symbol covers (PLT, stripped code).
    pub samples_unresolved: u64,
    /// Whether the binary has a block map (`.llvm_bb_addr_map`, clang's
    /// `-fbasic-block-address-map`), so that samples are counted by basic block too.
    pub block_map: bool,
    /// Why the binary's block map could not be read (the profile then has no blocks).
    pub block_map_problem: Option<String>,
    /// Of `samples_in_binary`, those in a basic block of their function by the binary's block
    /// map: the profile's `block` lines count them.
    pub samples_in_blocks: u64,
    /// Blocks no sample hit that ran whenever a sampled block of their function ran (its
    /// dominators and post-dominators in the function's control flow): `block` lines with 0
    /// samples.
    pub blocks_inferred: u64,
    /// Samples with no user-space frame (kernel threads, idle).
    pub samples_kernel_only: u64,
    /// Samples of other processes, left out by [`Options::pid`].
    pub samples_other_pid: u64,
    /// Samples of other events in the file, not used.
    pub samples_other_events: u64,
    /// Those events, each with its samples and why it was not used.
    pub unused_events: Vec<UnusedEvent>,
    /// Total weight of the call edges.
    pub calls: u64,
    /// Of `calls`, the weight whose call site is known (the profile's `site` lines hold it, less
    /// what the builder leaves out beyond `graph::MAX_SITES_PER_CALL` sites a call). A call
    /// recovered for a function without its own frame has one only when its caller calls the
    /// function directly from one place.
    pub calls_sited: u64,
    /// Calls with an end in the binary at an address no function symbol covers.
    pub calls_unresolved: u64,
    /// Stack samples taken while the innermost function had no frame of its own (at its entry
    /// or `ret`, or in a leaf built without one), whose real caller was recovered from the
    /// direct call that entered it; counted in `calls` too. x86-64 only.
    pub calls_recovered: u64,
    /// Such samples whose caller was entered through a pointer: no edge.
    pub calls_caller_unknown: u64,
    /// Of `calls`, the weight inferred from the code for a recording without stacks.
    pub calls_inferred: u64,
    /// Of `calls`, the weight that went through tail calls (jumps to another function's
    /// entry): stack samples whose caller was found by following them in the code (x86-64),
    /// and branch records of such jumps.
    pub calls_tail: u64,
    /// Of `calls_tail`, stack samples that chains of tail jumps ending in different callers
    /// could explain, shared among those callers by their own samples.
    pub calls_tail_shared: u64,
    /// Stack samples whose caller tail jumps left undecided (an indirect jump, more chains than
    /// the search follows, or candidates not shared by request): no edge.
    pub calls_tail_undecided: u64,
    /// Branch records of jumps that stay within one function (the input of a block layout).
    pub branches_within_functions: u64,
    /// Of those, the records of a jump from a block of the binary's block map to the start of
    /// one: `block-edge` counts.
    pub branches_to_block_edges: u64,
    /// Runs of code between two consecutive branch records of a sample (a filter that records
    /// every taken branch) that stayed in one function's blocks: fall-through `block-edge`
    /// counts.
    pub fall_throughs: u64,
    /// Such runs that left their function, ran backwards, lay outside the block map or passed
    /// the end of a block that cannot fall through.
    pub fall_throughs_unused: u64,
    /// Samples whose newest branch record repeated the next one where the code between the
    /// two cannot run straight through: a copy the CPU wrote (an LBR erratum), dropped.
    pub branches_repeated_dropped: u64,
    /// Branch records of returns.
    pub branches_returns: u64,
    /// Branch records of jumps into the middle of another function, system calls and the like.
    pub branches_other: u64,
    /// Branch records that neither the filter, nor a saved type, nor the code (not x86-64)
    /// could classify: no edge.
    pub branches_unclassified: u64,
    /// DWARF samples in the binary whose return address lay beyond perf's copy of the stack
    /// (a frame larger than `--call-graph dwarf,SIZE`): no edge.
    pub stacks_too_short: u64,
    /// DWARF samples in the binary that could not be unwound (a register missing from the
    /// sample, no progress by the unwinding rule, or an architecture other than x86-64 and
    /// aarch64): no edge.
    pub unwind_failed: u64,
    /// Samples the kernel dropped (perf's LOST and LOST_SAMPLES records).
    pub lost_samples: u64,
    /// Times the kernel throttled sampling because it took too long.
    pub throttle_events: u64,
    /// Records too short or inconsistent to read; they are skipped.
    pub unreadable_records: u64,
    /// How the binary's mappings were recognised.
    pub matched_by: Vec<MatchedBy>,
    /// Files with the binary's name but another build-id, left out (or used, if allowed).
    pub other_builds: Vec<OtherBuild>,
    /// Time from the first to the last sample, in seconds.
    pub seconds: f64,
    /// Where the samples of the binary's processes fell: its own code, the kernel, libraries.
    pub cpu: CpuShares,
}

impl Stats {
    /// Share (0 to 1) of the binary's samples that no symbol covers.
    pub fn unresolved_fraction(&self) -> f64 {
        if self.samples_in_binary == 0 {
            0.0
        } else {
            self.samples_unresolved as f64 / self.samples_in_binary as f64
        }
    }
}

/// A mapped file that looks like the binary but has another build-id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct OtherBuild {
    /// The mapped file's path, as perf recorded it.
    pub path: String,
    /// Its build-id in hex (empty when perf recorded none).
    pub build_id: String,
}

/// Why a perf.data file could not be read into a call graph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not a perf.data file: its magic or header is wrong.
    #[error("{path} is not a perf.data file: {msg}")]
    NotPerfData {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// The file is shorter than its header says.
    #[error("{path} is cut short: it has {size} bytes{}; was it copied before perf finished writing it?",
        expected.map(|e| format!(" but its header needs {e}")).unwrap_or_default())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The size its header needs, where known.
        expected: Option<u64>,
    },
    /// perf was stopped before it wrote the data size.
    #[error("{path} was never finished (its data size is 0): perf record was killed before it could write it")]
    Unfinished {
        /// The file.
        path: PathBuf,
    },
    /// A header or section is inconsistent.
    #[error("{path} is malformed: {msg}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is inconsistent.
        msg: String,
    },
    /// The records stop making sense part way.
    #[error("{path} is damaged after {records_read} records (near byte {offset}): {msg}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// Records read before the damage.
        records_read: u64,
        /// The byte near which the damage is.
        offset: u64,
        /// What is wrong there.
        msg: String,
    },
    /// The file has no sampled event.
    #[error("{path}: the file describes no sampled event; record with `hottext record` or `perf record`")]
    NoEvents {
        /// The file.
        path: PathBuf,
    },
    /// The samples of an event lack what hottext needs (an address, a stack layout it reads).
    #[error("{path}: the samples of event {event} {problem}, which hottext cannot read")]
    UnsupportedSamples {
        /// The file.
        path: PathBuf,
        /// The event.
        event: String,
        /// What they lack.
        problem: &'static str,
    },
    /// No mapping of the file is the binary.
    #[error("no sample in {}: {why}; recorded from another program? mapped files: {}", binary.display(), crate::listing::some_of(mapped_files))]
    NotRecorded {
        /// The binary asked for.
        binary: PathBuf,
        /// Why no mapping matched.
        why: String,
        /// Some of the files that had samples, for the user to recognise.
        mapped_files: Vec<String>,
    },
    /// The binary was mapped, but with another build-id.
    #[error("build-id mismatch: {} has build-id {binary_build_id}, but perf.data recorded {}",
        binary.display(), recorded.iter().map(|o| format!("{} with build-id {}", o.path, o.build_id)).collect::<Vec<_>>().join(", "))]
    BuildIdMismatch {
        /// The binary asked for.
        binary: PathBuf,
        /// Its build-id in hex.
        binary_build_id: String,
        /// The builds perf recorded under its name.
        recorded: Vec<OtherBuild>,
    },
    /// The binary was mapped, but no sample fell in its functions.
    #[error("no sample in {}: it was mapped, but none of the {samples} samples ({unresolved} without symbol) fell in its functions",
        binary.display())]
    NoSamples {
        /// The binary asked for.
        binary: PathBuf,
        /// Samples in the file.
        samples: u64,
        /// Of the binary's samples, those at an address no symbol covers.
        unresolved: u64,
    },
}

/// Reads `perf_data` and builds the call graph of `binary`'s functions.
///
/// `progress` is called now and then with (bytes read, file size).
pub fn read(
    perf_data: &Path,
    binary: &Binary,
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Graph, Stats), ProfileError> {
    call_graph::build(perf_data, binary, opts, progress)
}
