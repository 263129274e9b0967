//! The bytes of a `.llvm_bb_addr_map` section, which clang writes with
//! `-fbasic-block-address-map` (and `-fbasic-block-sections=labels` before clang 19): for each
//! function, where each of its basic blocks starts, how long it is, and the block's id.
//!
//! One entry per function, back to back, each in the form its own version byte says:
//!
//! ```text
//! version      u8      1 or 2 (section type SHT_LLVM_BB_ADDR_MAP); absent in the older type
//!                      SHT_LLVM_BB_ADDR_MAP_V0, whose entries are version 0
//! features     u8      bit 0 entry count, 1 block frequencies, 2 branch probabilities,
//!                      3 several ranges (clang 19), 4 no block entries; absent in V0
//! [ranges      uleb]   with bit 3 only: how many address ranges the function is split into
//! per range:   address (4 or 8 bytes, the file's byte order), block count (uleb), and per block
//!              [id uleb] (version 2; before, the block's index), offset uleb (version 1 on:
//!              from the end of the range's previous block; version 0: from the range's start),
//!              size uleb, metadata uleb (5 flag bits: return, tail call, EH pad,
//!              fall-through, indirect branch)
//! [entry count uleb]                       with bit 0
//! per block of all ranges, with bit 1 or 2: [frequency uleb] (bit 1),
//!              [successor count uleb, then (id uleb, probability uleb) each] (bit 2)
//! ```
//!
//! A range is the part of the function in one section: one for an unsplit function, several
//! when `-fbasic-block-sections` moves blocks into `.text.split.*` or clusters. Clang 17 and 18
//! write version 2 with a single range; clang 19 adds the range count. The section is input
//! from a file hottext did not write: every length is checked against the bytes left, and an
//! error names the byte it stopped at.

/// Section type of the current encoding (versions 1 and 2).
pub const SHT_LLVM_BB_ADDR_MAP: u32 = 0x6fff_4c0a;
/// Section type of the first encoding (clang 14-15), without version or feature bytes.
pub const SHT_LLVM_BB_ADDR_MAP_V0: u32 = 0x6fff_4c08;

/// [`BlockEntry::flags`]: the block ends in a return.
pub const FLAG_RETURN: u8 = 1;
/// [`BlockEntry::flags`]: the block ends in a tail call.
pub const FLAG_TAIL_CALL: u8 = 1 << 1;
/// [`BlockEntry::flags`]: the block is an exception landing pad (entered by the unwinder).
pub const FLAG_EH_PAD: u8 = 1 << 2;
/// [`BlockEntry::flags`]: control can fall through from the block's end into the next one.
pub const FLAG_CAN_FALL_THROUGH: u8 = 1 << 3;

/// The newest version this reader knows.
const NEWEST_VERSION: u8 = 2;

/// What an entry carries beside its blocks (its feature byte).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// The function's entry count follows its ranges (PGO).
    pub entry_count: bool,
    /// Each block's frequency follows.
    pub block_frequencies: bool,
    /// Each block's successors and their branch probabilities follow.
    pub branch_probabilities: bool,
    /// The function may lie in several ranges, counted before them.
    pub multiple_ranges: bool,
    /// The ranges carry block counts but no block entries.
    pub omit_block_entries: bool,
}

impl Features {
    /// The bits this reader knows; an entry with others is refused rather than misread.
    const KNOWN: u8 = 0b1_1111;

    fn from_byte(byte: u8) -> Option<Features> {
        (byte & !Self::KNOWN == 0).then_some(Features {
            entry_count: byte & 1 != 0,
            block_frequencies: byte & 2 != 0,
            branch_probabilities: byte & 4 != 0,
            multiple_ranges: byte & 8 != 0,
            omit_block_entries: byte & 16 != 0,
        })
    }
}

/// One basic block of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEntry {
    /// The id clang gave the block (stable under reordering); its index before version 2.
    pub id: u32,
    /// Its first byte, from the range's address.
    pub offset: u32,
    /// Its length in bytes.
    pub size: u32,
    /// The metadata flags as written (bit 0 return, 1 tail call, 2 EH pad, 3 can fall
    /// through, 4 indirect branch).
    pub flags: u8,
}

/// The blocks of a function that lie together in one section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRange {
    /// The range's first byte, as the file states it (for a linked file, a virtual address).
    pub address: u64,
    /// In the order of the code (empty when the features omit them).
    pub blocks: Vec<BlockEntry>,
}

/// A block's profile data, where the compiler had some (PGO builds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockProfile {
    /// Its frequency relative to the function's entry, as the compiler estimated it.
    pub frequency: Option<u64>,
    /// (successor block id, branch probability as a fraction of 2^31).
    pub successors: Vec<(u32, u32)>,
}

/// One function's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionBlocks {
    /// The entry's encoding version (0 for the old section type).
    pub version: u8,
    /// What the entry carries beside its blocks.
    pub features: Features,
    /// The first holds the function's entry (its address is the function's).
    pub ranges: Vec<BlockRange>,
    /// How often the function was entered, by the compiler's profile (PGO builds).
    pub entry_count: Option<u64>,
    /// One per block of all ranges in order, when the features say so; else empty.
    pub block_profiles: Vec<BlockProfile>,
}

/// Where and why the section could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset} of the block address map: {msg}")]
pub struct BbAddrMapError {
    /// From the section's start.
    pub offset: usize,
    /// What is wrong there.
    pub msg: String,
}

/// How the file lays out addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressForm {
    /// 4 (ELF32) or 8 (ELF64).
    pub size: usize,
    /// The byte order of the addresses: the file's.
    pub little_endian: bool,
}

/// Reads a whole section: `v0` for a section of type [`SHT_LLVM_BB_ADDR_MAP_V0`].
pub fn parse(
    bytes: &[u8],
    v0: bool,
    form: AddressForm,
) -> Result<Vec<FunctionBlocks>, BbAddrMapError> {
    let mut cursor = Cursor { bytes, at: 0, form };
    let mut functions = Vec::new();
    while cursor.at < bytes.len() {
        functions.push(cursor.function(v0)?);
    }
    Ok(functions)
}

struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
    form: AddressForm,
}

impl Cursor<'_> {
    fn function(&mut self, v0: bool) -> Result<FunctionBlocks, BbAddrMapError> {
        let (version, features) = if v0 {
            (0, Features::default())
        } else {
            let start = self.at;
            let version = self.byte("the version")?;
            if version == 0 || version > NEWEST_VERSION {
                return Err(self.error_at(start, format!("version {version}: this hottext reads versions 1 and 2 (clang 16-19); a newer clang may write others")));
            }
            let byte = self.byte("the feature byte")?;
            let features = Features::from_byte(byte).ok_or_else(|| {
                self.error_at(
                    start + 1,
                    format!("feature bits {byte:#04x} include ones this hottext does not know"),
                )
            })?;
            if byte != 0 && version < 2 {
                return Err(self.error_at(
                    start + 1,
                    format!("features {byte:#04x} need version 2, the entry says {version}"),
                ));
            }
            (version, features)
        };
        let range_count = if features.multiple_ranges {
            let start = self.at;
            let n = self.uleb32("the range count")?;
            if n == 0 {
                return Err(self.error_at(start, "a function in zero ranges".into()));
            }
            n
        } else {
            1
        };
        let mut ranges = Vec::new();
        let mut total_blocks = 0u64;
        for _ in 0..range_count {
            let range = self.range(version, features)?;
            total_blocks += range.blocks.len() as u64;
            ranges.push(range);
        }
        let entry_count = match features.entry_count {
            true => Some(self.uleb("the entry count")?),
            false => None,
        };
        let mut block_profiles = Vec::new();
        if features.block_frequencies || features.branch_probabilities {
            // Each block's data takes at least a byte: the loop ends with the bytes.
            for _ in 0..total_blocks {
                block_profiles.push(self.block_profile(features)?);
            }
        }
        Ok(FunctionBlocks {
            version,
            features,
            ranges,
            entry_count,
            block_profiles,
        })
    }

    fn range(&mut self, version: u8, features: Features) -> Result<BlockRange, BbAddrMapError> {
        let address = self.address()?;
        let count = self.uleb32("the block count")?;
        let mut blocks = Vec::new();
        if features.omit_block_entries {
            return Ok(BlockRange { address, blocks });
        }
        let mut previous_end = 0u32;
        for index in 0..count {
            let id = match version >= 2 {
                true => self.uleb32("a block id")?,
                false => index,
            };
            let offset_at = self.at;
            let mut offset = self.uleb32("a block offset")?;
            let size = self.uleb32("a block size")?;
            let flags_at = self.at;
            let flags = self.uleb32("a block's metadata")?;
            if flags >= 1 << 5 {
                return Err(self.error_at(
                    flags_at,
                    format!("block metadata {flags:#x} has bits this hottext does not know"),
                ));
            }
            if version >= 1 {
                offset = offset
                    .checked_add(previous_end)
                    .filter(|o| o.checked_add(size).is_some())
                    .ok_or_else(|| {
                        self.error_at(
                            offset_at,
                            format!("block {id} ends past 4 GiB from its range's start"),
                        )
                    })?;
                previous_end = offset + size;
            }
            blocks.push(BlockEntry {
                id,
                offset,
                size,
                flags: flags as u8,
            });
        }
        Ok(BlockRange { address, blocks })
    }

    fn block_profile(&mut self, features: Features) -> Result<BlockProfile, BbAddrMapError> {
        let mut profile = BlockProfile::default();
        if features.block_frequencies {
            profile.frequency = Some(self.uleb("a block frequency")?);
        }
        if features.branch_probabilities {
            let count = self.uleb("a successor count")?;
            for _ in 0..count {
                let id = self.uleb32("a successor id")?;
                let probability = self.uleb32("a branch probability")?;
                profile.successors.push((id, probability));
            }
        }
        Ok(profile)
    }

    fn error_at(&self, offset: usize, msg: String) -> BbAddrMapError {
        BbAddrMapError { offset, msg }
    }

    fn cut_short(&self, what: &str) -> BbAddrMapError {
        self.error_at(
            self.at,
            format!(
                "the section ends inside {what} (it is {} bytes)",
                self.bytes.len()
            ),
        )
    }

    fn byte(&mut self, what: &str) -> Result<u8, BbAddrMapError> {
        let byte = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| self.cut_short(what))?;
        self.at += 1;
        Ok(byte)
    }

    fn address(&mut self) -> Result<u64, BbAddrMapError> {
        let size = self.form.size;
        let raw = self
            .bytes
            .get(self.at..self.at + size)
            .ok_or_else(|| self.cut_short("an address"))?;
        let mut word = [0u8; 8];
        let address = if self.form.little_endian {
            word[..size].copy_from_slice(raw);
            u64::from_le_bytes(word)
        } else {
            word[8 - size..].copy_from_slice(raw);
            u64::from_be_bytes(word)
        };
        self.at += size;
        Ok(address)
    }

    /// An unsigned LEB128 number of at most 64 bits.
    fn uleb(&mut self, what: &str) -> Result<u64, BbAddrMapError> {
        let start = self.at;
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte(what)?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error_at(start, format!("{what} does not fit in 64 bits")))
    }

    fn uleb32(&mut self, what: &str) -> Result<u32, BbAddrMapError> {
        let start = self.at;
        let value = self.uleb(what)?;
        u32::try_from(value)
            .map_err(|_| self.error_at(start, format!("{what} {value} does not fit in 32 bits")))
    }
}

#[cfg(test)]
#[path = "bb_addr_map_tests.rs"]
pub(crate) mod tests;
