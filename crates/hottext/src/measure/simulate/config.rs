//! What one simulated A/B comparison runs (`hottext ab --simulate`), and what one of its runs
//! gives: read by the comparison ([`super::compare`]) and by the workers that run it side by
//! side.

use serde::Serialize;

use super::{Checks, Simulated};
use crate::measure::ab::{Service, Side};

/// The placeholder the commands use for the offset.
pub(crate) const OFFSET_PLACEHOLDER: &str = "{offset}";

/// What a simulated A/B comparison (`hottext ab --simulate`) runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Commands, or with `service` the servers' commands (all run with `sh -c`).
    pub a: String,
    /// Command or server B.
    pub b: String,
    /// The command form's baseline of A: the same program doing less work, whose counts are
    /// taken off A's.
    pub baseline_a: Option<String>,
    /// B's baseline command.
    pub baseline_b: Option<String>,
    /// The service form: servers started, loaded and stopped, instead of commands.
    pub service: Option<Service>,
    /// The service form's baseline load; none means start, ready, stop.
    pub baseline_load: Option<String>,
    /// Substituted for `{offset}`; `[0]` when the commands do not name it.
    pub offsets: Vec<u64>,
    /// The count of work (`checks.work`) and the output that must not differ.
    pub checks: Checks,
    /// The name of the count of work, for the per-unit rows (`instructions-per-NAME`).
    pub work_name: String,
    /// Simulations at once, each an (offset, side) pair; 1 runs them one after another. A
    /// service runs in parallel only when its commands name `{slot}`.
    pub jobs: usize,
    /// The CPUs the servers of parallel jobs are pinned to, one per job slot, the service's
    /// own CPU first.
    pub cpus: Vec<u32>,
}

impl SimConfig {
    /// Whether the A or B command names `{offset}`: required when more than one offset is asked.
    pub fn names_offset(&self) -> bool {
        self.a.contains(OFFSET_PLACEHOLDER) || self.b.contains(OFFSET_PLACEHOLDER)
    }

    /// Whether both servers name `{slot}`, so that servers side by side can listen apart.
    pub fn names_slot(&self) -> bool {
        self.a.contains(SLOT_PLACEHOLDER) && self.b.contains(SLOT_PLACEHOLDER)
    }
}

/// One side at one offset.
#[derive(Debug, Clone, Serialize)]
pub struct SimRecord {
    /// The start offset of the hot range this run used.
    pub offset: u64,
    /// Which command ran.
    pub side: Side,
    /// Its simulated counts per model.
    pub simulated: Simulated,
}

/// The placeholder for the worker's number in the service form's commands.
pub(crate) const SLOT_PLACEHOLDER: &str = "{slot}";
