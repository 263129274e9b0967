//! Addresses carry their kind in their type, so a load bias can never be applied twice or
//! forgotten (a whole class of PIE bugs).

use std::fmt;

/// An address as stated in the ELF file (symbol values, section and segment addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StatedAddr(pub u64);

/// An address in a running process: the stated address plus the load bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RuntimeAddr(pub u64);

/// A byte offset into the ELF file (mmap records carry these as `pgoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileOffset(pub u64);

impl RuntimeAddr {
    /// Removes the load `bias` (runtime minus stated) of the mapping that holds this address.
    pub fn to_stated(self, bias: u64) -> StatedAddr {
        StatedAddr(self.0.wrapping_sub(bias))
    }
}

impl fmt::Display for StatedAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for RuntimeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
