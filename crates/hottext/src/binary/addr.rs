//! Addresses carry their kind in their type, so a load bias can never be applied twice or
//! forgotten (a whole class of PIE bugs).

use std::fmt;

use serde::Serialize;

/// An address as stated in the ELF file (symbol values, section and segment addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct StatedAddr(pub u64);

/// An address in a running process: the stated address plus the load bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct RuntimeAddr(pub u64);

/// A byte offset into the ELF file (mmap records carry these as `pgoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct FileOffset(pub u64);

/// How far a process loaded the file from its stated addresses: runtime minus stated, modulo
/// 2^64 (0 for a fixed-address executable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct LoadBias(pub u64);

impl LoadBias {
    /// The bias that loaded `stated` at `runtime` (e.g. the entry point and `AT_ENTRY`).
    pub fn between(stated: StatedAddr, runtime: RuntimeAddr) -> LoadBias {
        LoadBias(runtime.0.wrapping_sub(stated.0))
    }
}

impl StatedAddr {
    /// Where a process loaded with `bias` has this address.
    pub(crate) fn to_runtime(self, bias: LoadBias) -> RuntimeAddr {
        RuntimeAddr(self.0.wrapping_add(bias.0))
    }
}

/// `{}` writes `0x…`; `{:x}` and `{:#014x}` format the number as for a `u64`.
macro_rules! hex_formats {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
        impl fmt::LowerHex for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }
    )*};
}

hex_formats!(StatedAddr, RuntimeAddr, FileOffset, LoadBias);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bias_found_from_one_address_moves_the_others() {
        let bias = LoadBias::between(StatedAddr(0x1040), RuntimeAddr(0x5555_5555_5040));
        assert_eq!(bias, LoadBias(0x5555_5555_4000));
        assert_eq!(
            StatedAddr(0x20_0000).to_runtime(bias),
            RuntimeAddr(0x5555_5575_4000)
        );
        // A fixed-address executable: no bias.
        let none = LoadBias::between(StatedAddr(0x401000), RuntimeAddr(0x401000));
        assert_eq!(StatedAddr(0x400000).to_runtime(none), RuntimeAddr(0x400000));
    }
}
