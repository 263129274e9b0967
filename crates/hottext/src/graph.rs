//! The weighted, directed call graph and its text format.
//!
//! Profiles are reviewed and reverted like code, so the canonical form is plain text, one record a
//! line, sorted so that re-running the same profile gives a byte-identical file:
//!
//! ```text
//! # hottext profile v5
//! # build-id: 3f2a…
//! fn    <name> <size-bytes> <self-samples>
//! alias <name> <other-name-at-the-same-address>
//! call  <caller> <callee> <weight>
//! site  <caller> <callee> <offset-bytes> <weight>
//! block <name> <block-id> <offset-bytes> <size-bytes> <samples>
//! block-edge <name> <from-block-id> <to-block-id> <count>
//! ```
//!
//! `fn` lines come before the `alias`, `call` and `block` lines that name them. The `site`
//! lines of a call follow its `call` line, by increasing offset (a [`CallSite`] says what they
//! mean). `block` lines come last, by function name and block id: the samples of one basic
//! block, by the id, offset and size the binary's `.llvm_bb_addr_map` gives it (a
//! [`BlockSamples`]); a block lies inside its function, and a function names a block once. A
//! `block` line with 0 samples is a block that ran but drew no sample: `profile` inferred it
//! from the function's control flow (it dominates or post-dominates a sampled block), or a
//! merge scaled its samples down to none; a block that never ran has no line. `block-edge`
//! lines follow, by function name, source and target block: how often branch records saw
//! control pass from one block of the function to another (a [`BlockEdge`]); both blocks have a
//! `block` line before it, and a function names an edge once.
//! Numbers are decimal. Unknown `#` lines are kept as headers and otherwise ignored; any other
//! malformed line is an error naming its number.
//!
//! Versions: v1 had no `site` lines; v2 added them; v3 escapes names: a byte that would break a
//! line or a field (whitespace, control characters, and `%` itself) is written `%XX`, so that
//! any symbol (Go's `hot fn(x)`, say) round-trips; v4 adds `block` lines, v5 `block-edge`
//! lines. Readers read all five (a v1 file is a profile without sites; v1 and v2 names are
//! taken as written). Writers write the oldest version that holds the profile: v5 when it has
//! block edges, v4 when it has blocks, else v2 when no name needs an escape, else v3, so that
//! builds still running an older hottext read the profiles of a newer pipeline whenever they
//! can.

mod block_edges;
mod blocks;
mod builder;
pub mod drift;
mod escape;
pub mod fit;
pub mod merge;

/// Header keys whose values count samples: a merge sums them by the parts' weights
/// (`merge::merge_weighted`), as it does the body's counts.
pub mod counted_header {
    /// Samples of the recording in the binary.
    pub(crate) const SAMPLES: &str = "samples";
    /// Samples of the processes that ran the binary.
    pub const PROCESS_SAMPLES: &str = "process-samples";
    /// Of the call weight, how much went through tail calls.
    pub const TAIL_CALL_WEIGHT: &str = "tail-call-weight";
    /// Of those, samples shared among candidate callers.
    pub const TAIL_CALL_SHARED: &str = "tail-call-shared";
    /// Stack samples whose caller tail calls left undecided.
    pub const TAIL_CALL_UNDECIDED: &str = "tail-call-undecided";
    /// One line per place the processes' samples fell in: `<samples> <place>`.
    pub const CPU_SAMPLES: &str = "cpu-samples";
    /// The keys with one count each.
    pub(crate) const SINGLE: [&str; 5] = [
        SAMPLES,
        PROCESS_SAMPLES,
        TAIL_CALL_WEIGHT,
        TAIL_CALL_SHARED,
        TAIL_CALL_UNDECIDED,
    ];
}
mod names;
mod read;
#[cfg(test)]
mod tests;
mod write;

use std::fmt;
use std::io::{self, BufRead};

use foldhash::HashMap;

use names::NameIndex;

pub use block_edges::BlockEdge;
pub use blocks::{BlockCoverage, BlockSamples};
use builder::capped_sum;
pub use builder::GraphBuilder;
pub use escape::declared_format;
pub use escape::escaped;
pub(crate) use escape::unescaped;
pub use read::MAX_COUNT;

/// A function of a [`Graph`]: its index in [`Graph::funcs`]. A type of its own, so that an
/// index into something else (a binary's functions, a chain) is never taken for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FuncId(pub u32);

impl FuncId {
    /// The id of `graph.funcs()[index]`.
    pub fn from_index(index: usize) -> FuncId {
        FuncId(index as u32)
    }

    /// Its index in [`Graph::funcs`] and in arrays kept beside it.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Ids from their numbers, for tests.
#[cfg(test)]
pub(crate) fn ids<const N: usize>(numbers: [u32; N]) -> Vec<FuncId> {
    numbers.into_iter().map(FuncId).collect()
}

impl fmt::Display for FuncId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Index<FuncId> for [Func] {
    type Output = Func;

    fn index(&self, id: FuncId) -> &Func {
        &self[id.index()]
    }
}

/// The first line of a profile whose names need escapes; readers insist on a first line of this
/// form so that a wrong file fails early.
pub const MAGIC: &str = "# hottext profile v3";
/// The first line of a profile with `block` lines.
const MAGIC_V4: &str = "# hottext profile v4";
/// The first line of a profile with `block-edge` lines.
const MAGIC_V5: &str = "# hottext profile v5";
/// The first line of a profile without escapes, which hottext before v3 reads too.
const MAGIC_V2: &str = "# hottext profile v2";

/// What the first line says before the version number.
const MAGIC_PREFIX: &str = "# hottext profile v";
/// The newest version this reader knows: 1 (no call sites), 2 (sites), 3 (escaped names), 4
/// (blocks) or 5 (block edges).
const VERSION: u32 = 5;

/// A function of the profile: a symbol of the binary, its size and its own samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Func {
    /// Symbol name as in the ELF symbol table (mangled).
    pub name: String,
    /// Size in bytes, from the symbol table.
    pub size: u64,
    /// Samples whose innermost frame was in this function.
    pub samples: u64,
    /// Other symbol names at the same address (identical-code folding, C aliases).
    pub aliases: Vec<String>,
}

/// The calls from one function to another, summed over every call site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The function the calls are made from.
    pub caller: FuncId,
    /// The function they enter.
    pub callee: FuncId,
    /// How many calls were seen (stack samples or branch records that name the pair).
    pub weight: u64,
}

/// Where in the caller a call sits, and how many of the calls of the pair were seen there.
///
/// `offset` is a byte of the call instruction, counted from the caller's start: the first byte
/// for branch records (their source is the call instruction), the last for stack samples (the
/// return address − 1; the return address itself would point past the caller when a call that
/// does not return ends it). The two differ by the call's length, 2 to 7 bytes, noise next to
/// the distances CDSort weighs. It is always below the caller's size.
///
/// `weight` is part of the pair's [`Call`] weight, not in addition to it: the sites of a pair
/// weigh at most its call, and what they do not cover is call weight whose site is unknown
/// (profiles before v2, a callee sampled before its frame was set up whose caller calls it from
/// several places, sites beyond [`MAX_SITES_PER_CALL`]). CDSort counts that rest from the middle
/// of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSite {
    /// The calling function.
    pub caller: FuncId,
    /// The called function.
    pub callee: FuncId,
    /// Bytes from the caller's start to a byte of the call instruction.
    pub offset: u64,
    /// The share of the pair's call weight seen at this site.
    pub weight: u64,
}

/// A call graph. Only the reader ([`Graph::read`]) and [`GraphBuilder`] make one, so every
/// graph keeps the invariants the algorithms rely on: function names are unique, a caller and
/// callee have one [`Call`], and every site belongs to a call and lies inside its caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// `# key: value` header lines, in file order (build-id, sample kind, …).
    headers: Vec<(String, String)>,
    funcs: Vec<Func>,
    /// At most one entry per (caller, callee) pair, sorted by them.
    calls: Vec<Call>,
    /// Call sites, where the profile knows them (empty for profiles that predate them), sorted
    /// by (caller, callee, offset); each pair has a [`Call`].
    sites: Vec<CallSite>,
    /// Sampled basic blocks, where the binary has a block map; sorted by (function, block).
    blocks: Vec<BlockSamples>,
    /// Block edges, where branch records showed them; sorted by (function, from, to), both
    /// ends among `blocks`.
    block_edges: Vec<BlockEdge>,
}

/// Why a profile could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A line that is no record of the format.
    #[error("line {line}: {msg}")]
    Malformed {
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        msg: String,
    },
    /// The first line is not a profile's.

    #[error("the file does not start with '{MAGIC}' (is it a hottext profile?)")]
    NotAProfile,
    /// A profile of a version this reader does not know.
    #[error("the file is a hottext profile v{0}; this hottext reads v1 to v{VERSION}: upgrade it")]
    NewerVersion(u32),
    /// A perf.data file given where a profile belongs.
    #[error("the file is a perf.data recording, not a profile: run `hottext profile FILE --binary BIN -o NAME.profile` first, and give that profile")]
    PerfData,
    /// A profile without a single `fn` line.
    #[error("the profile is empty: it names no function")]
    Empty,
    /// Counts whose sum no real recording reaches.
    #[error("the profile's {what} sum to over {MAX_COUNT}: no recording counts that many; the profile is damaged or crafted")]
    TooMany {
        /// Which counts: samples, call weights, …
        what: &'static str,
    },
    /// A caller and callee on two `call` lines.
    #[error("'call {caller} {callee}' is on two lines: a profile has one call line for each caller and callee, followed by its sites")]
    RepeatedCall {
        /// The caller's name as the file has it.
        caller: String,
        /// The callee's name.
        callee: String,
    },
    /// The file could not be read.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A call as a layout sees it: from a byte of the caller (its call site) to the callee's first
/// byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jump {
    /// The calling function.
    pub caller: FuncId,
    /// The called function.
    pub callee: FuncId,
    /// In bytes from the caller's start.
    pub offset: u64,
    /// Calls seen from there.
    pub weight: u64,
}

impl Graph {
    /// Every call as jumps: one per [`CallSite`], plus one from the middle of the caller for
    /// the call weight its sites do not account for (the estimate lld and hfsort use when they
    /// lack offsets). Offsets past the caller's end (a profile from another build) are clamped
    /// to its last byte.
    pub fn jumps(&self) -> impl Iterator<Item = Jump> + '_ {
        let last_byte = |f: FuncId| self.funcs[f.index()].size.max(1) - 1;
        let mut sited: HashMap<(FuncId, FuncId), u64> = Default::default();
        for s in &self.sites {
            *sited.entry((s.caller, s.callee)).or_default() += s.weight;
        }
        let at_sites = self.sites.iter().map(move |s| Jump {
            caller: s.caller,
            callee: s.callee,
            offset: s.offset.min(last_byte(s.caller)),
            weight: s.weight,
        });
        let unsited = self.calls.iter().filter_map(move |c| {
            let known = sited.get(&(c.caller, c.callee)).copied().unwrap_or(0);
            (c.weight > known).then(|| Jump {
                caller: c.caller,
                callee: c.callee,
                offset: self.funcs[c.caller.index()].size / 2,
                weight: c.weight - known,
            })
        });
        at_sites.chain(unsited)
    }

    /// `# key: value` header lines, in file order.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The functions; a [`FuncId`] is an index into them.
    pub fn funcs(&self) -> &[Func] {
        &self.funcs
    }

    /// The calls, one per caller and callee, sorted by them.
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// The call sites, sorted by caller, callee and offset.
    pub fn sites(&self) -> &[CallSite] {
        &self.sites
    }

    /// Replaces the header lines with key `key` by one line for each of `values`, at the end.
    pub fn set_headers(&mut self, key: &str, values: impl IntoIterator<Item = String>) {
        self.headers.retain(|(k, _)| k != key);
        self.headers
            .extend(values.into_iter().map(|v| (key.to_string(), v)));
    }

    /// Adds a function and returns its id; its name must not be in the graph yet.
    fn add_func(&mut self, func: Func) -> FuncId {
        self.funcs.push(func);
        FuncId::from_index(self.funcs.len() - 1)
    }

    /// The value of the first header line with `key`, if any.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Sets the header `key` to `value`: the first line with that key, or a new last one.
    pub fn set_header(&mut self, key: &str, value: impl fmt::Display) {
        let value = value.to_string();
        match self.headers.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.headers.push((key.to_string(), value)),
        }
    }

    /// The functions' samples, summed; at most [`MAX_COUNT`] in a profile that was read.
    pub fn total_samples(&self) -> u64 {
        self.funcs
            .iter()
            .fold(0u64, |sum, f| sum.saturating_add(f.samples))
    }

    /// The calls' weights, summed; at most [`MAX_COUNT`] in a profile that was read.
    pub fn total_call_weight(&self) -> u64 {
        self.calls
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.weight))
    }

    /// Reads the text format. Streams line by line, so memory is that of the graph itself.
    pub fn read(input: impl BufRead) -> Result<Graph, GraphError> {
        read::read(input)
    }
}

/// The most sites a call keeps, its heaviest; the rest of its weight has no site. Calls have
/// few sites: in a 20 000-sample profile of the demo service 5 741 calls had one and 17 two.
/// The limit bounds the file where one caller calls a callee from hundreds of places (a macro,
/// an inlined helper), each too light to move the layout. Exact offsets are kept rather than
/// merged into 64-byte buckets: with so few sites a call, buckets would save nothing.
pub const MAX_SITES_PER_CALL: usize = 8;
