//! The instruction-side caches hottext models, one definition each: the L1i that `auto`'s
//! layout model ([`crate::layout::metrics`]) fills and the iTLBs and L1i the simulation
//! ([`crate::measure::simulate`]) gives cachegrind where this CPU does not say its own.
//!
//! The defaults are AMD Zen 2-4's, which `bench/postgres/sim.py` used: a 32 KiB, 8-way L1i of
//! 64 B lines (Intel's too since Sandy Bridge); an L1 iTLB of 64 pages of any size, fully
//! associative; an L2 iTLB of 512 pages of 4 KiB or 2 MiB, 8-way (AMD's software optimization
//! guides for families 17h and 19h).

use serde::Serialize;

use crate::binary::HUGE_PAGE;

/// The small page size: a TLB entry covers this much without huge pages.
pub const PAGE: u64 = 4096;

/// A set-associative cache, or a TLB seen as one whose "line" is a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Geometry {
    /// Capacity: for a TLB, entries × page size.
    pub bytes: u64,
    /// Associativity: entries per set.
    pub ways: u64,
    /// A page for the TLBs.
    pub line: u64,
}

impl Geometry {
    /// Lines of `line` bytes held at once: a TLB's entries.
    pub const fn entries(&self) -> u64 {
        self.bytes / self.line
    }

    /// Sets of `ways` lines each.
    pub const fn sets(&self) -> u64 {
        self.bytes / (self.ways * self.line)
    }
}

/// The first-level instruction cache.
pub const L1I: Geometry = Geometry {
    bytes: 32 * 1024,
    ways: 8,
    line: 64,
};

/// The first-level iTLB for 4 KiB pages.
pub const L1_ITLB: Geometry = Geometry {
    bytes: 64 * PAGE,
    ways: 64,
    line: PAGE,
};

/// The second-level iTLB for 4 KiB pages.
pub const L2_ITLB: Geometry = Geometry {
    bytes: 512 * PAGE,
    ways: 8,
    line: PAGE,
};

/// The first-level iTLB for 2 MiB pages.
pub const L1_ITLB_HUGE: Geometry = Geometry {
    bytes: 64 * HUGE_PAGE,
    ways: 64,
    line: HUGE_PAGE,
};

/// The second-level iTLB for 2 MiB pages.
pub const L2_ITLB_HUGE: Geometry = Geometry {
    bytes: 512 * HUGE_PAGE,
    ways: 8,
    line: HUGE_PAGE,
};
