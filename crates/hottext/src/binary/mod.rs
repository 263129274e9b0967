//! ELF facts about one executable: its functions (address, size, names), build-id, executable
//! segments and the hot-text markers.
//!
//! Several symbols at one address are one function with aliases (identical-code folding, C
//! `alias` attributes). Local symbols stay distinct functions; when two locals share a name, each
//! gets a qualified name `name;file` (the `STT_FILE` symbol before it), so profiles stay
//! unambiguous. [`symbol_of`] strips the qualifier where a linker wants the plain symbol.

mod addr;
pub mod bb_addr_map;
mod block_map;
pub mod fingerprint;
mod toolchain;

pub use addr::{FileOffset, LoadBias, RuntimeAddr, StatedAddr};
pub use block_map::{block_entries, BlockMap, BlockMapError, PlacedBlock};
pub use toolchain::built_by_rustc;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};
/// Maps keyed by symbol names (foldhash mixes names that differ only in their last bytes).
type NameMap<V> = foldhash::HashMap<String, V>;

/// Name of the symbol the layout puts at the start of the hot range (2 MiB aligned).
pub(crate) const HOT_START: &str = "__hot_start";
/// Name of the symbol just past the last hot function.
pub(crate) const HOT_END: &str = "__hot_end";
/// Huge page size on x86-64 (a PMD mapping): the alignment of `__hot_start`, the unit the
/// runtime maps and the kernel's smaps counts in `AnonHugePages`/`FilePmdMapped`.
pub const HUGE_PAGE: u64 = 2 << 20;
/// The runtime's function that maps the hot range: a binary that has it is linked with the
/// runtime (statically it is a hidden symbol of `.symtab`, dynamically an import).
pub const RUNTIME_ENTRY: &str = "hottext_hugify_self";

/// A function of the binary: a sized text symbol, and the other names at its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Where its code starts (the symbol's value).
    pub start: StatedAddr,
    /// Bytes of code (the symbol's size; symbols without one are not functions here).
    pub size: u64,
    /// Canonical name: a global if there is one, else the first local; qualified when ambiguous.
    pub name: String,
    /// The other symbols at the same address (identical code folded, C++ constructor variants).
    pub aliases: Vec<String>,
}

impl Function {
    /// The first address past its code.
    pub fn end(&self) -> StatedAddr {
        // Saturating: a crafted symbol size must not wrap past the address space.
        StatedAddr(self.start.0.saturating_add(self.size))
    }
}

/// A loadable executable segment, for turning file offsets (mmap records) into stated addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecSegment {
    /// The segment's first stated address (`p_vaddr`).
    pub start: StatedAddr,
    /// Bytes of memory it occupies (`p_memsz`).
    pub mem_size: u64,
    /// Where its bytes begin in the file (`p_offset`).
    pub offset: FileOffset,
    /// Bytes of it in the file (`p_filesz`).
    pub file_size: u64,
}

/// An ELF executable or shared library as hottext sees it: functions, segments, build-id,
/// and whether the runtime is linked in.
#[derive(Debug)]
pub struct Binary {
    /// The file it was read from.
    pub path: PathBuf,
    /// The GNU build-id note's bytes; `None` when it was linked without one.
    pub build_id: Option<Vec<u8>>,
    /// Position-independent (ET_DYN): loaded at a bias chosen at run time.
    pub is_pie: bool,
    /// The machine the code is for.
    pub architecture: object::Architecture,
    /// Stated entry point (`e_entry`): with `AT_ENTRY` it gives a process's load bias.
    pub entry: StatedAddr,
    /// Sorted by start address, non-overlapping starts.
    pub functions: Vec<Function>,
    /// The executable `PT_LOAD` segments, in file order.
    pub exec_segments: Vec<ExecSegment>,
    /// Linked with hottext's runtime: defines or imports [`RUNTIME_ENTRY`] (`-lhottext_auto`,
    /// `-lhottext`, or the shared library).
    pub links_runtime: bool,
    /// Every defined symbol's address by name (plain names), for markers and look-ups.
    symbols: NameMap<StatedAddr>,
    /// The file as read, so that code fingerprints do not read it again.
    data: FileBytes,
    /// The basic blocks' addresses, read on first use ([`Binary::block_map`]).
    block_map: std::sync::OnceLock<Result<Option<BlockMap>, BlockMapError>>,
}

/// A file's bytes, shown by their length (a binary is tens of megabytes).
struct FileBytes(Vec<u8>);

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

/// A profile taken from another build of the binary: its addresses and call sites may mean
/// other code.
#[derive(Debug, thiserror::Error)]
#[error("the profile was taken from build-id {profile}, but {} has build-id {binary}", path.display())]
pub struct OtherBuild {
    /// The profile's `build-id` header, in hex.
    pub profile: String,
    /// The binary's own build-id, in hex.
    pub binary: String,
    /// The binary.
    pub path: PathBuf,
}

/// Why a binary could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BinaryError {
    /// The file could not be opened or read (or is not a regular file).
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The bytes are not an ELF file, or one `object` cannot parse.
    #[error("{path} is not an ELF file hottext can read: {msg}")]
    NotElf {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        msg: String,
    },
    /// The symbol table is gone, and with it every function's name and extent.
    #[error("{path} has no function symbols (it was stripped?); hottext needs the symbol table: rebuild without -s / strip")]
    NoSymbols {
        /// The file.
        path: PathBuf,
    },
}

impl Binary {
    /// Reads and parses the ELF file at `path`. Only a regular file is read: `/dev/zero` or a
    /// FIFO would never end.
    pub fn open(path: &Path) -> Result<Binary, BinaryError> {
        let io = |source| BinaryError::Io {
            path: path.into(),
            source,
        };
        if !std::fs::metadata(path).map_err(io)?.is_file() {
            return Err(BinaryError::NotElf {
                path: path.into(),
                msg: "it is not a regular file (a device, FIFO or directory)".into(),
            });
        }
        let data = std::fs::read(path).map_err(io)?;
        Self::parse(path, data)
    }

    /// Parses the ELF file `data`, read from `path`, and keeps its bytes.
    pub fn parse(path: &Path, data: Vec<u8>) -> Result<Binary, BinaryError> {
        let not_elf = |msg: String| BinaryError::NotElf {
            path: path.into(),
            msg,
        };
        let file = object::File::parse(&*data).map_err(|e| not_elf(e.to_string()))?;
        if file.format() != object::BinaryFormat::Elf {
            return Err(not_elf(format!("it is {:?}", file.format())));
        }
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let is_pie = file.kind() == object::ObjectKind::Dynamic;

        let exec_segments = file
            .segments()
            .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.contains(object::elf::PF_X)))
            .map(|s| {
                let (offset, file_size) = s.file_range();
                ExecSegment { start: StatedAddr(s.address()), mem_size: s.size(), offset: FileOffset(offset), file_size }
            })
            .collect();

        let text_sections: Vec<object::SectionIndex> = file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .map(|s| s.index())
            .collect();

        // Symbols at one address form one function; BTreeMap keeps them sorted by address.
        let mut at: BTreeMap<u64, Vec<RawSym>> = BTreeMap::new();
        let mut symbols = NameMap::default();
        let mut file_name = String::new();
        for sym in file.symbols() {
            let name = sym.name().unwrap_or("");
            if sym.kind() == SymbolKind::File {
                file_name = name.to_string();
                continue;
            }
            if sym.is_undefined() || name.is_empty() {
                continue;
            }
            symbols
                .entry(name.to_string())
                .or_insert(StatedAddr(sym.address()));
            let in_text = sym
                .section_index()
                .is_some_and(|i| text_sections.contains(&i));
            let is_code = sym.kind() == SymbolKind::Text || is_split_part(&sym, name);
            if !is_code || !in_text || sym.size() == 0 {
                continue;
            }
            at.entry(sym.address()).or_default().push(RawSym {
                name: name.to_string(),
                size: sym.size(),
                local: sym.is_local(),
                file: file_name.clone(),
            });
        }
        if at.is_empty() {
            return Err(BinaryError::NoSymbols { path: path.into() });
        }
        let links_runtime = symbols.contains_key(RUNTIME_ENTRY)
            || file
                .dynamic_symbols()
                .any(|s| s.name() == Ok(RUNTIME_ENTRY));
        Ok(Binary {
            path: path.into(),
            build_id,
            is_pie,
            architecture: file.architecture(),
            entry: StatedAddr(file.entry()),
            functions: name_functions(at),
            exec_segments,
            links_runtime,
            symbols,
            data: FileBytes(data),
            block_map: Default::default(),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data.0
    }

    /// The index in [`Binary::functions`] of the function each name stands for: canonical
    /// names first, then aliases (an alias two functions share names the first). The one way
    /// profile names are found in a binary.
    pub(crate) fn index_by_name(&self) -> foldhash::HashMap<&str, usize> {
        let mut by_name: foldhash::HashMap<&str, usize> = Default::default();
        by_name.reserve(self.functions.len());
        for (i, f) in self.functions.iter().enumerate() {
            by_name.insert(&f.name, i);
        }
        for (i, f) in self.functions.iter().enumerate() {
            for a in &f.aliases {
                by_name.entry(a).or_insert(i);
            }
        }
        by_name
    }

    /// Refuses a profile whose `build-id` header names another build than this file's. A
    /// profile or binary without a build-id cannot be checked and passes.
    pub(crate) fn check_profile_build(
        &self,
        profile_build_id: Option<&str>,
    ) -> Result<(), OtherBuild> {
        match (profile_build_id, self.build_id_hex()) {
            (Some(theirs), Some(ours)) if theirs != ours => Err(OtherBuild {
                profile: theirs.to_string(),
                binary: ours,
                path: self.path.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Whether the profile's `build-id` header is this file's own, known on both sides.
    pub(crate) fn is_build_of(&self, profile_build_id: Option<&str>) -> bool {
        profile_build_id.is_some() && profile_build_id == self.build_id_hex().as_deref()
    }

    /// The build-id in lower-case hex, as profiles and the store write it.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex)
    }

    /// The function whose bytes contain `addr`.
    pub fn function_at(&self, addr: StatedAddr) -> Option<usize> {
        let i = self
            .functions
            .partition_point(|f| f.start <= addr)
            .checked_sub(1)?;
        (addr < self.functions[i].end()).then_some(i)
    }

    /// Bytes of code: the sizes of all functions (the padding between them left out).
    pub fn code_bytes(&self) -> u64 {
        self.functions.iter().map(|f| f.size).sum()
    }

    /// The stated address of a defined symbol (a plain name, no `;file` qualifier).
    pub fn symbol(&self, name: &str) -> Option<StatedAddr> {
        self.symbols.get(name).copied()
    }

    /// `[__hot_start, __hot_end)` when both markers are defined.
    pub fn hot_range(&self) -> Option<(StatedAddr, StatedAddr)> {
        Some((self.symbol(HOT_START)?, self.symbol(HOT_END)?))
    }

    /// The file offset an address inside an executable segment is loaded from.
    pub(crate) fn offset_for_stated(&self, addr: StatedAddr) -> Option<FileOffset> {
        self.exec_segments
            .iter()
            .find(|s| addr >= s.start && addr.0 < s.start.0 + s.file_size)
            .map(|s| FileOffset(s.offset.0 + (addr.0 - s.start.0)))
    }

    /// The stated address that a file offset inside an executable segment is loaded at.
    pub(crate) fn stated_for_offset(&self, offset: FileOffset) -> Option<StatedAddr> {
        self.exec_segments
            .iter()
            .find(|s| offset.0 >= s.offset.0 && offset.0 < s.offset.0 + s.file_size)
            .map(|s| StatedAddr(s.start.0 + (offset.0 - s.offset.0)))
    }
}

/// Whether `sym` is a part of a function that clang's `-fbasic-block-sections` split off
/// (`f.cold`, `f.__part.N`): code with a size but no type (STT_NOTYPE), so that without this
/// the samples there would have no function.
fn is_split_part<'d>(sym: &impl ObjectSymbol<'d>, name: &str) -> bool {
    sym.kind() == SymbolKind::Unknown && (name.ends_with(".cold") || name.contains(".__part."))
}

struct RawSym {
    name: String,
    size: u64,
    local: bool,
    file: String,
}

/// Picks each function's canonical name and qualifies local names that occur more than once.
fn name_functions(at: BTreeMap<u64, Vec<RawSym>>) -> Vec<Function> {
    let mut chosen: Vec<(u64, RawSym, Vec<String>)> = Vec::with_capacity(at.len());
    for (addr, mut syms) in at {
        // Globals first, then by name: a stable choice whatever the symbol table order.
        syms.sort_by(|a, b| a.local.cmp(&b.local).then_with(|| a.name.cmp(&b.name)));
        let mut syms = syms.into_iter();
        let Some(first) = syms.next() else { continue };
        let mut size = first.size;
        let mut aliases = Vec::new();
        for s in syms {
            size = size.max(s.size);
            if s.name != first.name && !aliases.contains(&s.name) {
                aliases.push(s.name);
            }
        }
        chosen.push((addr, RawSym { size, ..first }, aliases));
    }
    let mut count: foldhash::HashMap<&str, u32> = Default::default();
    for (_, s, _) in &chosen {
        *count.entry(s.name.as_str()).or_default() += 1;
    }
    let ambiguous: Vec<bool> = chosen
        .iter()
        .map(|(_, s, _)| count[s.name.as_str()] > 1)
        .collect();
    drop(count);

    let mut seen: NameMap<u32> = NameMap::default();
    chosen
        .into_iter()
        .zip(ambiguous)
        .map(|((addr, s, aliases), ambiguous)| {
            let mut name = if ambiguous && s.local {
                format!("{};{}", s.name, s.file)
            } else {
                s.name
            };
            let n = seen.entry(name.clone()).or_default();
            *n += 1;
            if *n > 1 {
                name = format!("{name};{n}");
            }
            Function {
                start: StatedAddr(addr),
                size: s.size,
                name,
                aliases,
            }
        })
        .collect()
}

/// The linker-visible symbol of a profile name: drops the `;file` qualifier of ambiguous locals.
pub fn symbol_of(name: &str) -> &str {
    name.split(';').next().unwrap_or(name)
}

/// Lower-case hex digits of `bytes`, two per byte (build-ids, hashes).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualifier_is_stripped_for_linkers() {
        assert_eq!(symbol_of("helper;a.c"), "helper");
        assert_eq!(symbol_of("helper;a.c;2"), "helper");
        assert_eq!(symbol_of("_ZN3foo3barEv"), "_ZN3foo3barEv");
    }

    #[test]
    fn duplicate_locals_stay_distinct_and_aliases_merge() {
        let sym = |name: &str, local: bool, file: &str| RawSym {
            name: name.into(),
            size: 16,
            local,
            file: file.into(),
        };
        let mut at = BTreeMap::new();
        at.insert(0x1000, vec![sym("helper", true, "a.c")]);
        at.insert(0x2000, vec![sym("helper", true, "b.c")]);
        at.insert(
            0x3000,
            vec![
                sym("zed_alias", false, "b.c"),
                sym("main", false, "b.c"),
                sym("loc", true, "b.c"),
            ],
        );
        let f = name_functions(at);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["helper;a.c", "helper;b.c", "main"]);
        assert_eq!(f[2].aliases, ["zed_alias", "loc"]);
    }
}
