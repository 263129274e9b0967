//! What each linker needs to lay out an order as one 2 MiB-aligned hot range bracketed by
//! `__hot_start` and `__hot_end`.
//!
//! | linker        | input (`--format`)                                 | markers and alignment from |
//! | ------------- | -------------------------------------------------- | -------------------------- |
//! | GNU ld, lld   | `ld-script` (`-Wl,-T,FILE`)                        | the script itself          |
//! | gold          | `gold-order` (`--section-ordering-file`)           | [`markers_object`]         |
//! | lld           | `lld-order` (`--symbol-ordering-file`)             | [`markers_object`]         |
//!
//! mold is not supported: Debian 12's mold 1.10 has no option that orders sections. lld can also
//! order by itself from the call edges (`lld-cgprofile`); that gives no markers.
//!
//! Order files cannot define symbols or align anything, so the markers object supplies two
//! empty sections: `.text.hottext.start` (2 MiB aligned, defines `__hot_start`) and
//! `.text.hottext.end` (defines `__hot_end`). The order files name them first and last.
//!
//! Every format can end the range on a 2 MiB boundary ([`Padding`]), so that a range followed
//! by little text still has whole pages for the runtime: the script aligns `__hot_end`, the
//! markers object aligns the end section.
//!
//! All inputs assume objects compiled with `-ffunction-sections`, so that every function has an
//! input section of its own named after it.
//!
//! Every output, its name and what it needs are in one table, [`FORMATS`], one file per writer;
//! [`write()`] is the one call from a fitted profile to an output's bytes.

mod call_graph_profile;
mod clang_bb_sections;
mod format;
mod gold_order;
mod hot_list;
mod ld_script;
mod list;
mod lld_order;
mod markers;
mod padding;
mod planned;
mod ranges;
mod write;

pub use crate::layout::alignment::{Alignment, ScriptPlacement};
pub use clang_bb_sections::{
    BlockOrder, Clusters, SplitRule, DEFAULT_MIN_BLOCK_SHARE, DEFAULT_MIN_SPLIT_SAMPLES,
};
pub use format::{format, Format, FORMATS};
pub use hot_list::{HotList, HotText, UnsafeNames};
pub use markers::{host_architecture, markers_object};
pub use padding::{Padding, PaddingPlan};
pub use planned::{read_plan, Plan, PlanError};
pub use ranges::{read_ranges, RangesError, RangesFile};
pub use write::{write, Markers, Ordering, Origin, Request, Written, MARKERS_ADVICE};

use std::io::{self, Write};

use crate::binary::symbol_of;
use crate::graph::Func;
use crate::prefetch::{prefetch, DISTANCE as PREFETCH_DISTANCE};
use format::{Laid, Names, OrderWriter};

/// Section that holds `__hot_start` in the markers object.
pub(crate) const START_SECTION: &str = ".text.hottext.start";
/// Section that holds `__hot_end` in the markers object.
pub(crate) const END_SECTION: &str = ".text.hottext.end";

/// A function to place: its profile name, the other symbols at its address, its size in the
/// profiled binary (0 if unknown), and whether a `.text.unlikely.<symbol>` section would be the
/// function itself.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The profile name (`name;file.c` for a static namesake).
    pub name: &'a str,
    /// The other symbols at its address, as profile names.
    pub aliases: &'a [String],
    /// Bytes in the profiled binary, 0 if unknown.
    pub size: u64,
    /// False when GCC split a `.cold` part off this function: that part, not the function,
    /// lives in `.text.unlikely.<symbol>` (see `is_split_cold_part`). Otherwise a section of
    /// that name is the whole function, put there because it is `cold` (`#[cold]` in Rust,
    /// `__attribute__((cold))` in C), and it is placed like any other.
    pub unlikely_is_whole: bool,
}

impl<'a> From<&'a Func> for Entry<'a> {
    fn from(f: &'a Func) -> Self {
        Entry {
            name: &f.name,
            aliases: &f.aliases,
            size: f.size,
            unlikely_is_whole: true,
        }
    }
}

impl Entry<'_> {
    /// Plain linker symbols of this function, canonical first.
    fn symbols(&self) -> impl Iterator<Item = &str> {
        std::iter::once(symbol_of(self.name)).chain(self.aliases.iter().map(|a| symbol_of(a)))
    }

    /// The section prefixes this function's sections can have.
    fn section_prefixes(&self) -> &'static [&'static str] {
        if self.unlikely_is_whole {
            &SECTION_PREFIXES
        } else {
            &SECTION_PREFIXES[..SECTION_PREFIXES.len() - 1]
        }
    }

    /// The sections clang's basic-block sections split this function's cold blocks into.
    fn split_sections(&self) -> impl Iterator<Item = String> + '_ {
        self.symbols().map(|symbol| format!(".text.split.{symbol}"))
    }

    /// Input sections that can hold this function's symbols, each once.
    fn sections(&self) -> impl Iterator<Item = String> + '_ {
        let prefixes = self.section_prefixes();
        unique(
            self.symbols()
                .flat_map(move |symbol| prefixes.iter().map(move |p| format!("{p}{symbol}"))),
        )
    }
}

/// A name that cannot be written safely, a format that lacks what it needs, or a failed write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmitError {
    /// A name the format could read as more than a name.
    #[error("{what} {name:?} cannot be written safely in {target}: it holds {bad:?} ({rule}; a profile from a store or another host is not trusted)")]
    UnsafeName {
        /// `function` or `alias`.
        what: &'static str,
        /// The name, as the profile spells it.
        name: String,
        /// The first character the format cannot carry.
        bad: char,
        /// `a list` or `a linker input`.
        target: &'static str,
        /// The names the format takes, in words.
        rule: &'static str,
    },
    /// A format written from a binary's addresses, asked for without a binary.
    #[error("--format {format} lists addresses of a binary: give --binary BIN")]
    NeedsBinary {
        /// The format's name.
        format: &'static str,
    },
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl EmitError {
    /// The profile name the error is about, to find its line.
    pub fn name(&self) -> Option<&str> {
        match self {
            EmitError::UnsafeName { name, .. } => Some(name),
            EmitError::NeedsBinary { .. } | EmitError::Io(_) => None,
        }
    }
}

/// Refuses a symbol that could be read as more than a name by a linker: linker scripts give
/// meaning to parentheses, quotes, braces, `=`, `;`, wildcards and whitespace (a profile line
/// `alias main x)}"hot1"=hot2` once defined a symbol through the script), order files to
/// newlines and wildcards. The symbols compilers emit for C, C++ and Rust need only these
/// characters; a plain list takes any name without whitespace or control characters.
fn check_symbol(names: Names, what: &'static str, symbol: &str) -> Result<(), EmitError> {
    let safe = |c: char| match names {
        Names::Any => !c.is_whitespace() && !c.is_control(),
        Names::Symbols => c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'),
    };
    let (target, rule) = match names {
        Names::Any => (
            "a list",
            "a list takes any name without whitespace or control characters",
        ),
        Names::Symbols => (
            "a linker input",
            "linker inputs take symbols of letters, digits, '_', '.' and '$'",
        ),
    };
    // Bytes first, the usual case and the fast one (every name is checked on every write): an
    // ASCII byte is the character it encodes.
    let plain = |b: u8| b.is_ascii() && safe(char::from(b));
    if !symbol.is_empty() && symbol.bytes().all(plain) {
        return Ok(());
    }
    match symbol.chars().find(|&c| !safe(c)) {
        None if !symbol.is_empty() => Ok(()),
        bad => Err(EmitError::UnsafeName {
            what,
            name: symbol.to_string(),
            bad: bad.unwrap_or(' '),
            target,
            rule,
        }),
    }
}

/// Checks every name of `entries` for `names` (see `check_symbol`). [`emit`] runs it before it
/// writes anything; [`hot_list`] runs it per function to leave out the ones `fetch` refuses.
fn check_entries(names: Names, entries: &[Entry]) -> Result<(), EmitError> {
    for (i, e) in entries.iter().enumerate() {
        prefetch_name_ahead(entries, i);
        let name = match names {
            Names::Any => e.name,
            Names::Symbols => symbol_of(e.name),
        };
        check_symbol(names, "function", name)?;
        for alias in e.aliases {
            check_symbol(names, "alias", symbol_of(alias))?;
        }
    }
    Ok(())
}

/// Starts loading the name of the entry a few places after `i`: an order's names lie at
/// random in memory, and on a million entries the loops over them waited on each.
fn prefetch_name_ahead(entries: &[Entry], i: usize) {
    if let Some(first_byte) = entries
        .get(i + PREFETCH_DISTANCE)
        .and_then(|ahead| ahead.name.as_bytes().first())
    {
        prefetch(first_byte);
    }
}

/// Writes `laid` with an order's `writer`, placed as `laid.placement` says where the format
/// can ([`Format::places_individually`]). Every name is checked ([`check_entries`]) before
/// anything is written.
pub(crate) fn emit(
    writer: &OrderWriter,
    laid: &Laid,
    out: &mut dyn Write,
) -> Result<(), EmitError> {
    check_entries(writer.names, laid.entries())?;
    (writer.write)(laid, out)?;
    Ok(out.flush()?)
}

/// Prefixes of the input sections that can hold a function `<symbol>` under
/// `-ffunction-sections` (rustc's default on Linux): the plain one, the ones GCC uses for `hot`
/// attributes and for `main` and other start-up code, and last the one of `cold` functions,
/// which GCC and LLVM both use. GCC also puts a part split off as `<symbol>.cold` in
/// `.text.unlikely.<symbol>`: that part never enters the hot range, so the last prefix is left
/// out for a function known to have one ([`Entry::unlikely_is_whole`]).
pub(crate) const SECTION_PREFIXES: [&str; 4] =
    [".text.", ".text.hot.", ".text.startup.", ".text.unlikely."];

/// Whether `name` is a part GCC split off a function as unlikely to run (`foo.cold`,
/// `foo.cold.3`, in `.text.unlikely.foo`). Such parts stay out of the hot range even when a
/// sample hit them: the compiler moved them out of the way, and in the hot range each one
/// would spread its rare bytes between the hot ones.
fn is_split_cold_part(name: &str) -> bool {
    split_cold_parent(name).is_some()
}

/// The symbol of the function a split cold part `name` was split off (`foo` for `foo.cold`
/// and `foo.cold.3`), whose section `.text.unlikely.foo` holds the part.
pub(crate) fn split_cold_parent(name: &str) -> Option<&str> {
    let symbol = symbol_of(name);
    // `.cold.` then digits: the digits hold no `.`, so that `.cold.` is the last one.
    let numbered = symbol.trim_end_matches(|c: char| c.is_ascii_digit());
    if numbered.len() < symbol.len() {
        numbered.strip_suffix(".cold.")
    } else {
        symbol.strip_suffix(".cold")
    }
}

/// Functions of the C runtime's start-up objects: glibc's `crt1.o` and `crti.o`, GCC's
/// `crtbegin.o` (and their `S`, `T` and `r` variants), and before glibc 2.34 the start-up
/// functions `libc_nonshared.a` added. Every C, C++ and Rust program links them, but from
/// objects built without -ffunction-sections, so no linker input can move them, and they run
/// once or twice. A stray sample in one (`_start` on a short run) would plan a function that
/// `verify --binary --planned` then finds missing.
const C_RUNTIME_STARTUP: [&str; 11] = [
    "_start",
    "_dl_relocate_static_pie",
    "__libc_csu_init",
    "__libc_csu_fini",
    "_init",
    "_fini",
    "__gmon_start__",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
];

/// Whether `name` is start-up code of the C runtime (`_start`, `frame_dummy` and the rest of
/// crt1.o, crti.o and crtbegin.o), which no linker input can place.
pub fn is_c_runtime_startup(name: &str) -> bool {
    C_RUNTIME_STARTUP.contains(&symbol_of(name))
}

/// An order file: `first`, each of `lines` once, in order, and `last`, one a line. Order files
/// name the markers object's sections or symbols first and last, so that the hot range is
/// bracketed by them.
fn write_order_file(
    first: &str,
    lines: impl Iterator<Item = String>,
    last: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "{first}")?;
    for line in unique(lines) {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "{last}")
}

/// Keeps the first occurrence of each item, in order.
fn unique(items: impl Iterator<Item = String>) -> impl Iterator<Item = String> {
    let mut seen = foldhash::HashSet::default();
    items.filter(move |s| seen.insert(s.clone()))
}

/// [`emit`] of bare entries, as if a graph had listed them.
#[cfg(test)]
pub(crate) fn emit_entries(
    format: &Format,
    entries: &[Entry],
    placement: ScriptPlacement,
    origin: &str,
    out: &mut dyn Write,
) -> Result<(), EmitError> {
    let list = HotList {
        entries: entries.to_vec(),
        kept: Vec::new(),
        split_cold: Vec::new(),
        startup: Vec::new(),
        unsafe_names: Vec::new(),
    };
    let graph = crate::graph::Graph::default();
    let laid = Laid {
        graph: &graph,
        list: &list,
        placement,
        origin,
        split: SplitRule::default(),
    };
    let format::Writer::Order(writer) = &format.writer else {
        panic!("{} writes no order", format.name);
    };
    emit(writer, &laid, out)
}

#[cfg(test)]
mod tests;
