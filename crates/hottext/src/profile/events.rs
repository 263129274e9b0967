//! The sampled events of a perf.data file: what each one's samples carry, and which of them the
//! call graph is built from.
//!
//! A recording often samples more than one event: the same event on each PMU of a hybrid CPU
//! (`cpu_core/cycles/` and `cpu_atom/cycles/`, each sampling the code that ran on its cores),
//! or several events at once. Every event whose samples carry the chosen kind of call
//! information is used, each decoded with its own layout, so no core type's samples are lost.
//! Branch records win over stacks when a file has both: each record is a branch the CPU took,
//! where a stack sample gives one edge per sample; DWARF stacks win over frame pointers (exact
//! at every instruction), and plain samples, whose edges are inferred, come last. Events left
//! out are named in `Stats::unused_events` with their sample counts.

use std::path::Path;

use linux_perf_data::linux_perf_event_reader::{BranchSampleFormat, RecordType, SampleFormat};
use linux_perf_data::AttributeDescription;
use serde::Serialize;

use super::perf_file::{event_name, PerfData};
use super::sample::{RegNumbers, SampleLayout};
use super::{ProfileError, SampleKind};

/// The call information in an event's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Carries {
    /// Branch records (`perf record -b` / `-j FILTER`, LBR).
    BranchRecords,
    /// The user registers and a copy of the stack, to unwind (`--call-graph dwarf`).
    DwarfStack,
    /// A call chain the kernel walked by frame pointers (`-g`, `--call-graph fp`).
    FpStack,
    /// Only the sampled address (`perf record` without `-g`).
    Plain,
}

impl Carries {
    fn of(format: SampleFormat) -> Carries {
        if format.contains(SampleFormat::BRANCH_STACK) {
            Carries::BranchRecords
        } else {
            Carries::stack_of(format)
        }
    }

    fn stack_of(format: SampleFormat) -> Carries {
        if format.contains(SampleFormat::REGS_USER | SampleFormat::STACK_USER) {
            Carries::DwarfStack
        } else if format.contains(SampleFormat::CALLCHAIN) {
            Carries::FpStack
        } else {
            Carries::Plain
        }
    }

    /// The kind of call edges the samples give.
    fn kind(self) -> SampleKind {
        match self {
            Carries::BranchRecords => SampleKind::Branch,
            Carries::DwarfStack => SampleKind::Dwarf,
            Carries::FpStack => SampleKind::Stack,
            Carries::Plain => SampleKind::Plain,
        }
    }

    /// As `profile --events` prints it.
    pub fn describe(self) -> &'static str {
        match self {
            Carries::BranchRecords => "branch records",
            Carries::DwarfStack => "dwarf regs+stack",
            Carries::FpStack => "fp stack",
            Carries::Plain => "plain samples",
        }
    }
}

/// One event of a perf.data file, as `hottext profile --events` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// The event's name, as perf gives it (`cpu-clock`, `cycles:u`, …).
    pub name: String,
    /// Its samples in the file, in every process.
    pub samples: u64,
    /// What a profile uses of the samples: branch records if they have them.
    pub carries: Carries,
    /// The stack that samples with branch records hold too (`perf record -g -b`), if any.
    pub also_stack: Option<Carries>,
    /// For branch records, the branch filter (`perf record -j`) in perf's names: `any`,
    /// `any_call`, `u`, …; empty otherwise.
    pub branch_filter: Vec<String>,
    /// Why hottext cannot read its samples, if it cannot.
    pub unreadable: Option<&'static str>,
    /// The call graph is built from it.
    pub used: bool,
}

/// An event whose samples the call graph leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnusedEvent {
    /// The event's name, as perf gives it.
    pub name: String,
    /// Its samples in the file, in every process.
    pub samples: u64,
    /// Why the call graph leaves them out.
    pub why: String,
}

/// The events of a file and the choice among them, before any sample is read.
pub(crate) struct EventChoice {
    /// Per attribute index: its decoding when the graph uses it.
    pub layouts: Vec<Option<SampleLayout>>,
    pub kind: SampleKind,
    /// Per attribute index, in the file's order.
    pub events: Vec<Event>,
}

impl EventChoice {
    /// Chooses the events to build the graph from: all readable ones of the best kind any has
    /// (branch records, DWARF stacks, frame-pointer stacks, plain samples).
    pub fn new(
        path: &Path,
        perf: &PerfData,
        regs: Option<RegNumbers>,
    ) -> Result<EventChoice, ProfileError> {
        let (mut events, mut layouts) = catalogue(perf, regs);
        let Some(kind) = mark_used(&mut events) else {
            // Every event is unreadable: name the first, with why.
            if let Some(e) = events.first() {
                return Err(ProfileError::UnsupportedSamples {
                    path: path.into(),
                    event: e.name.clone(),
                    problem: e.unreadable.unwrap_or("cannot be read"),
                });
            }
            return Err(ProfileError::NoEvents { path: path.into() });
        };
        for (event, layout) in events.iter().zip(&mut layouts) {
            if !event.used {
                *layout = None;
            }
        }
        Ok(EventChoice {
            layouts,
            kind,
            events,
        })
    }

    /// The names of the events used, joined: the profile's `event` header.
    pub(crate) fn used_names(&self) -> String {
        let used: Vec<&str> = self
            .events
            .iter()
            .filter(|e| e.used)
            .map(|e| e.name.as_str())
            .collect();
        used.join(", ")
    }

    /// The events left out, with their sample counts (`samples[attr_index]`) and the reason.
    pub fn unused(&self, samples: &[u64]) -> Vec<UnusedEvent> {
        let chosen = format!("{} were used", self.kind.description());
        self.events
            .iter()
            .zip(samples)
            .filter(|(e, _)| !e.used)
            .map(|(e, &samples)| UnusedEvent {
                name: e.name.clone(),
                samples,
                why: match (e.unreadable, e.carries) {
                    (Some(problem), _) => format!("its samples {problem}"),
                    (None, Carries::Plain) => "its samples carry no call information".into(),
                    (None, carries) => format!("it carries {}; {chosen}", carries.describe()),
                },
            })
            .collect()
    }
}

/// Every event of the file with what its samples carry, and its decoding where it has one.
fn catalogue(perf: &PerfData, regs: Option<RegNumbers>) -> (Vec<Event>, Vec<Option<SampleLayout>>) {
    let attrs = perf.attributes();
    let mut layouts = Vec::with_capacity(attrs.len());
    let mut events = Vec::with_capacity(attrs.len());
    for desc in attrs {
        let layout = SampleLayout::new(&desc.attr, perf.endian(), regs);
        let carries = Carries::of(desc.attr.sample_format);
        let unreadable = match &layout {
            None => Some("carry counter values (perf record -s)"),
            Some(l) if !l.has_pid() => Some("have no process id (PERF_SAMPLE_TID)"),
            Some(_) => None,
        };
        events.push(describe(desc, carries, unreadable));
        layouts.push(layout);
    }
    (events, layouts)
}

/// Marks the events the graph uses, and returns their kind: the best any readable event has
/// (branch records, DWARF stacks, frame-pointer stacks, plain samples); `None` when no event
/// is readable.
fn mark_used(events: &mut [Event]) -> Option<SampleKind> {
    let usable = |e: &Event, kind| e.unreadable.is_none() && e.carries.kind() == kind;
    let kind = [
        SampleKind::Branch,
        SampleKind::Dwarf,
        SampleKind::Stack,
        SampleKind::Plain,
    ]
    .into_iter()
    .find(|&k| events.iter().any(|e| usable(e, k)))?;
    for e in events.iter_mut() {
        e.used = usable(e, kind);
    }
    Some(kind)
}

fn describe(
    desc: &AttributeDescription,
    carries: Carries,
    unreadable: Option<&'static str>,
) -> Event {
    let branch_filter = if carries == Carries::BranchRecords {
        branch_filter(desc.attr.branch_sample_format)
    } else {
        Vec::new()
    };
    let also_stack = Some(Carries::stack_of(desc.attr.sample_format))
        .filter(|&s| carries == Carries::BranchRecords && s != Carries::Plain);
    Event {
        name: event_name(desc),
        samples: 0,
        carries,
        also_stack,
        branch_filter,
        unreadable,
        used: false,
    }
}

/// perf's names for the bits of `branch_sample_type` that choose branches (`-j`), not those
/// that only shape the records (`save_type`, `hw_index`, …).
fn branch_filter(format: BranchSampleFormat) -> Vec<String> {
    const NAMES: [(BranchSampleFormat, &str); 13] = [
        (BranchSampleFormat::ANY, "any"),
        (BranchSampleFormat::ANY_CALL, "any_call"),
        (BranchSampleFormat::ANY_RETURN, "any_ret"),
        (BranchSampleFormat::IND_CALL, "ind_call"),
        (BranchSampleFormat::CALL, "call"),
        (BranchSampleFormat::IND_JUMP, "ind_jmp"),
        (BranchSampleFormat::COND, "cond"),
        (BranchSampleFormat::CALL_STACK, "stack"),
        (BranchSampleFormat::ABORT_TX, "abort_tx"),
        (BranchSampleFormat::IN_TX, "in_tx"),
        (BranchSampleFormat::NO_TX, "no_tx"),
        (BranchSampleFormat::USER, "u"),
        (BranchSampleFormat::KERNEL, "k"),
    ];
    NAMES
        .iter()
        .filter(|(bit, _)| format.contains(*bit))
        .map(|(_, name)| (*name).to_string())
        .collect()
}

/// The events of `path` with their sample counts, read in one pass: what `profile --events`
/// lists. Files whose events hottext cannot use are listed too, with the reason.
pub fn events(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Vec<Event>, ProfileError> {
    let mut perf = PerfData::open(path)?;
    let (mut events, _) = catalogue(&perf, None);
    mark_used(&mut events);
    perf.for_each_event(progress, |attr_index, record| {
        if record.record_type == RecordType::SAMPLE {
            if let Some(e) = events.get_mut(attr_index) {
                e.samples += 1;
            }
        }
    })?;
    Ok(events)
}
