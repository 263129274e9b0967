//! From records to the call graph, in two steps.
//!
//! 1. One pass over perf.data, in time order, so that every sample is mapped through the mmap
//!    records in force when it was taken: each sample becomes a pair of stated addresses in the
//!    binary (innermost frame and return address, or a branch's source and target), counted.
//! 2. `resolve.rs` turns each distinct pair into functions once. A program repeats the same few
//!    pairs millions of times, and the look-ups (symbols, code bytes) are random accesses into
//!    large tables; doing them once per pair, in address order, is what makes this fast.

use std::collections::BTreeSet;
use std::path::Path;

use foldhash::HashMap;
use linux_perf_data::linux_perf_event_reader::{EventRecord, RawEventRecord, RecordType};

use super::branch_filter::RecordedBranch;
use super::branch_records::Recorded;
use super::code::Code;
use super::events::EventChoice;
use super::mappings::{display_path, BinaryMappings, Identity, MatchedBy, Verdict};
use super::mmap_record::executable_mapping;
use super::perf_file::PerfData;
use super::resolve::{graph, resolve, Tally, NO_CALLER, UNRESOLVED};
use super::sample::{RegNumbers, Sample, SampleLayout};
use super::shares::PlaceCounter;
use super::unwind::{CfiUnwinder, Step};
use super::{Options, OtherBuild, ProfileError, SampleKind, Stats};
use crate::binary::{hex, Binary, RuntimeAddr};
use crate::graph::Graph;
use crate::os::proc::Pid;

pub(super) fn build(
    path: &Path,
    binary: &Binary,
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Graph, Stats), ProfileError> {
    let mut perf = PerfData::open(path)?;
    let events = EventChoice::new(path, &perf, RegNumbers::of(binary.architecture))?;
    let kind = events.kind;
    let mut reader = Reader {
        binary,
        identity: Identity::new(binary, opts.allow_build_id_mismatch),
        recorded_build_ids: perf.build_ids()?,
        pid_filter: opts.pid,
        share_candidates: !opts.drop_ambiguous_callers,
        samples_by_event: vec![0; events.layouts.len()],
        events,
        kind,
        unwinder: match kind {
            SampleKind::Dwarf => CfiUnwinder::new(binary),
            _ => None,
        },
        mappings: BinaryMappings::default(),
        places: PlaceCounter::default(),
        tally: Tally::default(),
        stats: Stats {
            sample_kind: kind,
            ..Stats::default()
        },
        matched_by: BTreeSet::new(),
        other_builds: BTreeSet::new(),
        other_code: BTreeSet::new(),
        mapped_files: BTreeSet::new(),
        first_time: u64::MAX,
        last_time: 0,
    };
    reader.stats.records = perf.for_each_event(progress, |attr_index, record| {
        reader.record(attr_index, record)
    })?;
    reader.finish(Code::of(binary))
}

struct Reader<'b> {
    binary: &'b Binary,
    identity: Identity,
    /// perf's build-id table: path → build-id.
    recorded_build_ids: HashMap<Vec<u8>, Vec<u8>>,
    pid_filter: Option<Pid>,
    /// See [`super::Options::drop_ambiguous_callers`].
    share_candidates: bool,
    /// The events and the decoding of each one the graph uses, by attribute index.
    events: EventChoice,
    /// Samples of each event, by attribute index, to name the unused ones with their counts.
    samples_by_event: Vec<u64>,
    kind: SampleKind,
    /// For [`SampleKind::Dwarf`] samples, on the architectures we unwind.
    unwinder: Option<CfiUnwinder>,
    mappings: BinaryMappings,
    /// Every file's mappings, for where the processes' samples fell.
    places: PlaceCounter,
    tally: Tally,
    stats: Stats,
    matched_by: BTreeSet<MatchedBy>,
    other_builds: BTreeSet<OtherBuild>,
    /// Files with the binary's name, no build-id to decide, and other code.
    other_code: BTreeSet<String>,
    /// Executable files seen in mmap records, to name them when the binary is not among them.
    mapped_files: BTreeSet<String>,
    first_time: u64,
    last_time: u64,
}

impl Reader<'_> {
    fn record(&mut self, attr_index: usize, record: &RawEventRecord) {
        match record.record_type {
            RecordType::SAMPLE => {
                if let Some(n) = self.samples_by_event.get_mut(attr_index) {
                    *n += 1;
                }
                match self.events.layouts.get(attr_index).copied().flatten() {
                    Some(layout) => self.sample(layout, record),
                    None => self.stats.samples_other_events += 1,
                }
            }
            RecordType::MMAP | RecordType::MMAP2 => self.mmap(record),
            RecordType::FORK | RecordType::COMM | RecordType::LOST => match record.parse() {
                Ok(EventRecord::Fork(f)) if f.pid != f.ppid => {
                    self.mappings.fork(f.ppid, f.pid);
                    self.places.fork(f.ppid, f.pid);
                }
                Ok(EventRecord::Comm(c)) if c.is_execve => {
                    self.mappings.exec(c.pid);
                    self.places.exec(c.pid);
                }
                Ok(EventRecord::Lost(l)) => self.stats.lost_samples += l.count,
                Ok(_) => {}
                Err(_) => self.stats.unreadable_records += 1,
            },
            // Every layout reads the count in the file's byte order.
            RecordType::LOST_SAMPLES => match (self.events.layouts.iter().flatten().next())
                .and_then(|layout| layout.first_u64(&record.data.as_slice()))
            {
                Some(lost) => self.stats.lost_samples += lost,
                None => self.stats.unreadable_records += 1,
            },
            RecordType::THROTTLE => self.stats.throttle_events += 1,
            _ => {}
        }
    }

    fn sample(&mut self, layout: SampleLayout, record: &RawEventRecord) {
        let body = record.data.as_slice();
        let Ok(sample) = layout.decode(record.misc, &body) else {
            self.stats.unreadable_records += 1;
            return;
        };
        self.stats.samples += 1;
        if let Some(t) = sample.time {
            self.first_time = self.first_time.min(t);
            self.last_time = self.last_time.max(t);
        }
        let pid = sample.pid.unwrap_or(-1);
        if self.pid_filter.is_some_and(|p| p != pid) {
            self.stats.samples_other_pid += 1;
            return;
        }
        if self.kind == SampleKind::Branch {
            // The records lie where they lie, whatever the sampled address.
            self.branch_records(pid, &layout, &sample);
        }
        let [innermost, return_address] = sample.top_user_frames();
        let located = innermost.and_then(|addr| self.locate(pid, addr));
        if self.mappings.runs_binary(pid) {
            (self.places).count(pid, sample.user_mode, innermost, located.is_some());
        }
        if innermost.is_none() {
            self.stats.samples_kernel_only += 1;
            return;
        }
        let Some(ip) = located else {
            return; // not in the binary
        };
        self.stats.samples_in_binary += 1;
        match self.kind {
            SampleKind::Stack => {
                let ret = self.stated_return(pid, return_address);
                self.tally.stack_tops.add((ip, ret));
            }
            SampleKind::Dwarf => {
                let ret = self.unwound_return(pid, ip, &sample);
                self.tally.cfi_tops.add((ip, ret));
            }
            SampleKind::Branch | SampleKind::Plain => self.tally.stack_tops.add((ip, NO_CALLER)),
        }
    }

    /// The stated return address (or marker) of runtime return address `ret`.
    fn stated_return(&self, pid: Pid, ret: Option<u64>) -> u64 {
        // The caller is executing the call instruction, just before the return address.
        match ret.and_then(|r| self.locate(pid, r.wrapping_sub(1))) {
            None => NO_CALLER,
            Some(UNRESOLVED) => UNRESOLVED,
            Some(site) => site + 1,
        }
    }

    /// The stated return address (or marker) of a DWARF sample at stated address `ip`, by one
    /// step of unwinding through the binary's CFI.
    fn unwound_return(&mut self, pid: Pid, ip: u64, sample: &Sample) -> u64 {
        if ip == UNRESOLVED {
            return NO_CALLER; // no function to unwind from; counted as unresolved
        }
        let (Some(unwinder), Some(regs), Some(stack)) =
            (self.unwinder.as_mut(), sample.regs_user, sample.stack_user)
        else {
            self.stats.unwind_failed += 1;
            return NO_CALLER;
        };
        match unwinder.step(ip, &regs, stack) {
            Step::Returns(ret) => self.stated_return(pid, Some(ret)),
            Step::Outermost => NO_CALLER,
            Step::StackTooShort => {
                self.stats.stacks_too_short += 1;
                NO_CALLER
            }
            Step::Failed => {
                self.stats.unwind_failed += 1;
                NO_CALLER
            }
        }
    }

    fn branch_records(&mut self, pid: Pid, layout: &SampleLayout, sample: &Sample) {
        let Some(branches) = sample.branches else {
            return;
        };
        let filter = layout.branches;
        // The source of the newer record, while the code up to it can be followed back: the
        // records come newest first, and with every taken branch recorded the code from this
        // record's target to that source ran straight through.
        let mut newer_source = None;
        let repeated_top = filter.records_every_branch() && {
            let mut top = branches.iter();
            matches!((top.next(), top.next()), (Some(a), Some(b)) if (a.0, a.1) == (b.0, b.1))
        };
        for (i, (from, to, flags)) in branches.iter().enumerate() {
            let (from, to) = (self.locate(pid, from), self.locate(pid, to));
            if repeated_top && i == 0 {
                // Perhaps a copy the CPU wrote: the code decides (`profile::block_edges`).
                if let (Some(from), Some(to)) = (from, to) {
                    self.tally.branches.repeated_tops.add((from, to));
                }
                continue;
            }
            if filter.records_every_branch() {
                let aborted = filter.aborted(flags);
                if let (Some(end), Some(start), false) = (newer_source, to, aborted) {
                    self.tally.branches.fall_throughs.add((start, end));
                }
                newer_source = from.filter(|_| !aborted);
            }
            // A branch with an end outside the binary is not an edge of the binary.
            let (Some(from), Some(to)) = (from, to) else {
                continue;
            };
            let bin = match filter.recorded(flags) {
                RecordedBranch::Call => Recorded::Call,
                RecordedBranch::Jump => Recorded::Jump,
                RecordedBranch::Unknown => Recorded::Unknown,
                RecordedBranch::Return => {
                    self.stats.branches_returns += 1;
                    continue;
                }
                RecordedBranch::Other => {
                    self.stats.branches_other += 1;
                    continue;
                }
            };
            self.tally.branches.by_kind[bin as usize].add((from, to));
        }
    }

    /// The stated address in the binary of `addr` in process `pid` ([`UNRESOLVED`] when it is
    /// in the binary's mappings but outside its code); `None` when the binary is not mapped there.
    fn locate(&self, pid: Pid, addr: u64) -> Option<u64> {
        let offset = self.mappings.file_offset(pid, RuntimeAddr(addr))?;
        Some(
            self.binary
                .stated_for_offset(offset)
                .map_or(UNRESOLVED, |a| a.0),
        )
    }

    fn mmap(&mut self, record: &RawEventRecord) {
        let m = match executable_mapping(record) {
            Ok(Some(m)) => m,
            Ok(None) => return,
            Err(()) => {
                self.stats.unreadable_records += 1;
                return;
            }
        };
        let (path, mmap_build_id) = (&m.path[..], m.build_id);
        let recorded = mmap_build_id.or_else(|| self.recorded_build_ids.get(path).cloned());
        let verdict = self.identity.judge(self.binary, path, recorded.as_deref());
        let is_binary = matches!(verdict, Verdict::Binary(_));
        match verdict {
            Verdict::Binary(by) => {
                self.matched_by.insert(by);
                if by == MatchedBy::MismatchAllowed {
                    self.note_other_build(path, recorded.as_deref().unwrap_or_default());
                }
            }
            Verdict::OtherBuild { build_id } => self.note_other_build(path, &build_id),
            Verdict::OtherCode => {
                self.other_code.insert(display_path(path));
            }
            Verdict::Other => {
                if !path.starts_with(b"[") && !path.starts_with(b"//anon") {
                    self.mapped_files.insert(display_path(path));
                }
            }
        }
        self.mappings.map(m.pid, m.start, m.len, m.pgoff, is_binary);
        self.places.map(m.pid, m.start, m.len, path);
    }

    fn note_other_build(&mut self, path: &[u8], build_id: &[u8]) {
        self.other_builds.insert(OtherBuild {
            path: display_path(path),
            build_id: hex(build_id),
        });
    }

    fn finish(mut self, code: Code<'_>) -> Result<(Graph, Stats), ProfileError> {
        self.stats.event = self.events.used_names();
        self.stats.unused_events = self.events.unused(&self.samples_by_event);
        self.stats.matched_by = self.matched_by.iter().copied().collect();
        self.stats.other_builds = self.other_builds.iter().cloned().collect();
        self.stats.cpu = std::mem::take(&mut self.places).finish();
        if self.last_time >= self.first_time {
            self.stats.seconds = (self.last_time - self.first_time) as f64 / 1e9;
        }
        let binary_path = self.binary.path.clone();
        if self.matched_by.is_empty() {
            if !self.other_builds.is_empty() {
                return Err(ProfileError::BuildIdMismatch {
                    binary: binary_path,
                    binary_build_id: self.binary.build_id_hex().unwrap_or_default(),
                    recorded: self.stats.other_builds,
                });
            }
            return Err(ProfileError::NotRecorded {
                binary: binary_path,
                why: self.why_not_recorded(),
                mapped_files: self.files_with_samples(),
            });
        }
        let counts = resolve(
            self.binary,
            code,
            self.kind,
            self.share_candidates,
            self.tally,
            &mut self.stats,
        );
        if counts.self_samples.iter().all(|&n| n == 0) {
            return Err(ProfileError::NoSamples {
                binary: binary_path,
                samples: self.stats.samples,
                unresolved: self.stats.samples_unresolved,
            });
        }
        let graph = graph(self.binary, &counts, self.kind, &self.stats);
        Ok((graph, self.stats))
    }

    /// Why no mapping is the binary, for the error.
    fn why_not_recorded(&self) -> String {
        if !self.other_code.is_empty() {
            let files: Vec<&str> = self.other_code.iter().map(String::as_str).collect();
            return format!(
                "no build-id decides, and {} with its name has other code (--allow-build-id-mismatch uses it anyway)",
                files.join(", ")
            );
        }
        match self.binary.build_id {
            None => "it has no build-id, and no mapped file has its path or its name".into(),
            Some(_) => {
                "no mapped file has its build-id, its path, or its name without a build-id".into()
            }
        }
    }

    /// The files perf saw samples in (its build-id table), else every executable mapping;
    /// never the binary's namesakes, which the reason names.
    fn files_with_samples(&self) -> Vec<String> {
        let mut hit: Vec<String> = self
            .recorded_build_ids
            .keys()
            .filter(|p| !p.starts_with(b"[") && !self.identity.has_its_name(p))
            .map(|p| display_path(p))
            .collect();
        if hit.is_empty() {
            hit = (self.mapped_files.iter())
                .filter(|p| !self.identity.has_its_name(p.as_bytes()))
                .cloned()
                .collect();
        }
        hit.sort();
        hit
    }
}
