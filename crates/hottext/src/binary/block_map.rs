//! A binary's basic blocks by address, from its `.llvm_bb_addr_map` ([`super::bb_addr_map`]):
//! which block of which function a sampled address lies in.

use object::read::elf::{ElfFile, FileHeader, SectionHeader};
use object::{Object, ObjectSection};

use super::bb_addr_map::{self, AddressForm, BbAddrMapError, FunctionBlocks};
use super::{Binary, StatedAddr};

/// One basic block where the binary has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedBlock {
    /// Its first byte, as the binary states it.
    pub start: StatedAddr,
    /// Its length in bytes (never 0 in a [`BlockMap`]).
    pub size: u64,
    /// Its id in its function's entry of the map.
    pub id: u32,
    /// Its metadata flags ([`super::bb_addr_map::FLAG_RETURN`] and the others).
    pub flags: u8,
}

impl PlacedBlock {
    /// Just past its last byte.
    pub fn end(&self) -> StatedAddr {
        StatedAddr(self.start.0.saturating_add(self.size))
    }
}

/// The blocks of every function the map covers, sorted by address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockMap {
    /// Non-empty blocks only: an empty one holds no address.
    blocks: Vec<PlacedBlock>,
}

/// Why a binary's block map could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BlockMapError {
    /// The file is an object file: its map's addresses are zeros that relocations fill in.
    #[error("it is a relocatable object, whose block addresses are relocations: use the linked executable or shared library")]
    Relocatable,
    /// The section's bytes do not read as the encoding says.
    #[error("its block address map is damaged: {0}")]
    Damaged(#[from] BbAddrMapError),
    #[error("cannot read its section '{name}': {msg}")]
    /// The section could not be read (or decompressed) from the file.
    Section {
        /// Its name.
        name: String,
        /// What is wrong.
        msg: String,
    },
}

impl BlockMap {
    /// The map of the functions `entries` describe; blocks that overlap an earlier one (a
    /// damaged or crafted map) are left out, so that every address has at most one block.
    pub fn new(entries: &[FunctionBlocks]) -> BlockMap {
        let mut blocks: Vec<PlacedBlock> = entries
            .iter()
            .flat_map(|f| &f.ranges)
            .flat_map(|range| {
                range.blocks.iter().map(move |b| PlacedBlock {
                    start: StatedAddr(range.address.saturating_add(u64::from(b.offset))),
                    size: u64::from(b.size),
                    id: b.id,
                    flags: b.flags,
                })
            })
            .filter(|b| b.size > 0)
            .collect();
        blocks.sort_unstable_by_key(|b| (b.start, b.size));
        let mut end = StatedAddr(0);
        blocks.retain(|b| {
            let apart = b.start >= end;
            end = end.max(b.end());
            apart
        });
        BlockMap { blocks }
    }

    /// The block whose bytes contain `addr`.
    pub fn block_at(&self, addr: StatedAddr) -> Option<&PlacedBlock> {
        let i = self
            .blocks
            .partition_point(|b| b.start <= addr)
            .checked_sub(1)?;
        let block = &self.blocks[i];
        (addr < block.end()).then_some(block)
    }

    /// The blocks that start in `[start, end)`, by address.
    pub fn blocks_in(&self, start: StatedAddr, end: StatedAddr) -> &[PlacedBlock] {
        let from = self.blocks.partition_point(|b| b.start < start);
        let to = self.blocks.partition_point(|b| b.start < end);
        &self.blocks[from..to.max(from)]
    }
}

impl Binary {
    /// The binary's block map: `None` when it has no `.llvm_bb_addr_map` (built by gcc, or by
    /// clang without `-fbasic-block-address-map`). Read once, on first use.
    pub fn block_map(&self) -> Result<Option<&BlockMap>, &BlockMapError> {
        self.block_map
            .get_or_init(|| block_entries(self.bytes()).map(|e| e.map(|e| BlockMap::new(&e))))
            .as_ref()
            .map(Option::as_ref)
    }
}

/// The entries of every block-map section of the ELF file `data`, in section order; `None`
/// when it has none.
pub fn block_entries(data: &[u8]) -> Result<Option<Vec<FunctionBlocks>>, BlockMapError> {
    let unreadable = |msg: String| BlockMapError::Section {
        name: "(ELF header)".into(),
        msg,
    };
    match object::File::parse(data).map_err(|e| unreadable(e.to_string()))? {
        object::File::Elf32(file) => entries_of(&file),
        object::File::Elf64(file) => entries_of(&file),
        _ => Ok(None),
    }
}

fn entries_of<Elf: FileHeader>(
    file: &ElfFile<'_, Elf>,
) -> Result<Option<Vec<FunctionBlocks>>, BlockMapError> {
    let endian = file.endian();
    let form = AddressForm {
        size: if file.is_64() { 8 } else { 4 },
        little_endian: file.is_little_endian(),
    };
    let mut found = None;
    for section in file.sections() {
        let sh_type = section.elf_section_header().sh_type(endian);
        let v0 = match sh_type.0 {
            bb_addr_map::SHT_LLVM_BB_ADDR_MAP => false,
            bb_addr_map::SHT_LLVM_BB_ADDR_MAP_V0 => true,
            _ => continue,
        };
        if file.kind() == object::ObjectKind::Relocatable {
            return Err(BlockMapError::Relocatable);
        }
        let name = section.name().unwrap_or("?").to_string();
        let bytes = section
            .uncompressed_data()
            .map_err(|e| BlockMapError::Section {
                name: name.clone(),
                msg: e.to_string(),
            })?;
        let entries = bb_addr_map::parse(&bytes, v0, form)?;
        found.get_or_insert_with(Vec::new).extend(entries);
    }
    Ok(found)
}
