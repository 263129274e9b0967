//! Where the CPU samples of the binary's processes fell: in the binary's own code, in the
//! kernel, in each library. The first figure a user asks for: a layout of the binary can only
//! speed up the time spent in its own code (nginx spends 3.8 % there: most of its time is in
//! libc, zlib and libcrypto).
//!
//! Counted over the processes that have the binary mapped when they are sampled (perf's
//! CPU-wide recordings hold every process on the CPUs), by the sampled instruction: the kernel
//! when the CPU was in it, else the file whose executable mapping holds the address.

use foldhash::HashMap;
use serde::Serialize;

use super::header;
use super::mappings::display_path;
use crate::graph::Graph;
use crate::os::proc::Pid;

/// Label of samples taken in the kernel.
pub const KERNEL: &str = "[kernel]";
/// Label of user samples outside every file mapping (JIT code, a mapping perf missed).
pub(crate) const NO_FILE: &str = "[no file]";

/// The processes' samples by where they fell.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CpuShares {
    /// Samples of the processes that ran the binary (the denominator of every share).
    pub process_samples: u64,
    /// Of those, in the binary's own code (its mappings, with or without a symbol).
    pub binary_samples: u64,
    /// Every other place with samples, the most first: `[kernel]`, a library's path,
    /// `[vdso]`, `[no file]`.
    pub elsewhere: Vec<PlaceShare>,
}

/// One place's samples: where in the processes' address space they fell.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlaceShare {
    /// `[kernel]`, a library's path, `[vdso]` or `[no file]`.
    pub place: String,
    /// Samples there.
    pub samples: u64,
}

impl CpuShares {
    /// Share (0 to 1) of the processes' samples in the binary's own code.
    pub(crate) fn binary_fraction(&self) -> f64 {
        self.binary_samples as f64 / self.process_samples.max(1) as f64
    }

    /// Share (0 to 1) of the processes' samples that `samples` are.
    pub fn fraction(&self, samples: u64) -> f64 {
        samples as f64 / self.process_samples.max(1) as f64
    }
}

/// The binary's own code in the profile's header lines.
const BINARY: &str = "[binary]";
/// Places named in a profile's header, the most first; the rest are summed as [`OTHER_FILES`].
const PLACES_IN_HEADER: usize = 12;
const OTHER_FILES: &str = "[other files]";

impl CpuShares {
    /// Writes the shares into a profile's header (`process-samples`, `cpu-samples`), so that
    /// `doctor --profile` can state them without the recording.
    pub(crate) fn write_headers(&self, graph: &mut Graph) {
        if self.process_samples == 0 {
            return;
        }
        graph.set_header(header::PROCESS_SAMPLES, self.process_samples);
        let named = self.elsewhere.iter().take(PLACES_IN_HEADER);
        let rest: u64 = self
            .elsewhere
            .iter()
            .skip(PLACES_IN_HEADER)
            .map(|p| p.samples)
            .sum();
        let lines = std::iter::once((self.binary_samples, BINARY))
            .chain(named.map(|p| (p.samples, p.place.as_str())))
            .chain((rest > 0).then_some((rest, OTHER_FILES)))
            .map(|(n, place)| format!("{n} {}", place.replace(char::is_control, "?")));
        graph.set_headers(header::CPU_SAMPLES, lines);
    }

    /// The shares a profile's header states; `None` when it states none (a profile written
    /// before them, or a file of another tool).
    pub(crate) fn from_headers(graph: &Graph) -> Option<CpuShares> {
        let process_samples = graph.header(header::PROCESS_SAMPLES)?.trim().parse().ok()?;
        let mut shares = CpuShares {
            process_samples,
            ..CpuShares::default()
        };
        for (key, value) in graph.headers() {
            if key != header::CPU_SAMPLES {
                continue;
            }
            let (n, place) = value.split_once(' ')?;
            let samples = n.parse().ok()?;
            match place {
                BINARY => shares.binary_samples = samples,
                _ => shares.elsewhere.push(PlaceShare {
                    place: place.to_string(),
                    samples,
                }),
            }
        }
        Some(shares)
    }
}

/// One executable mapping of a file into a process.
#[derive(Debug, Clone, Copy)]
struct Mapped {
    start: u64,
    end: u64,
    place: usize,
}

/// Every process's executable mappings and the samples counted so far.
#[derive(Debug, Default)]
pub(super) struct PlaceCounter {
    by_pid: HashMap<Pid, Vec<Mapped>>,
    places: Vec<String>,
    place_ids: HashMap<Vec<u8>, usize>,
    /// Samples per place id.
    counts: Vec<u64>,
    kernel: u64,
    no_file: u64,
    process_samples: u64,
    binary_samples: u64,
}

impl PlaceCounter {
    /// An executable mapping of `path`; it replaces what it overlaps, as in the kernel.
    pub fn map(&mut self, pid: Pid, start: u64, len: u64, path: &[u8]) {
        let end = start.saturating_add(len);
        let place = match self.place_ids.get(path) {
            Some(&id) => id,
            None => {
                let id = self.places.len();
                self.places.push(display_path(path));
                self.counts.push(0);
                self.place_ids.insert(path.to_vec(), id);
                id
            }
        };
        let maps = self.by_pid.entry(pid).or_default();
        maps.retain(|m| m.end <= start || m.start >= end);
        maps.push(Mapped { start, end, place });
    }

    pub fn fork(&mut self, parent: Pid, child: Pid) {
        if let Some(maps) = self.by_pid.get(&parent).cloned() {
            self.by_pid.insert(child, maps);
        }
    }

    pub fn exec(&mut self, pid: Pid) {
        self.by_pid.remove(&pid);
    }

    /// A sample of a process that runs the binary: in the kernel (`user_mode` false), in the
    /// binary (`in_binary`), else wherever `user_ip` is mapped.
    pub fn count(&mut self, pid: Pid, user_mode: bool, user_ip: Option<u64>, in_binary: bool) {
        self.process_samples += 1;
        if !user_mode {
            self.kernel += 1;
        } else if in_binary {
            self.binary_samples += 1;
        } else {
            let place = user_ip.and_then(|ip| {
                let maps = self.by_pid.get(&pid)?;
                maps.iter().find(|m| ip >= m.start && ip < m.end)
            });
            match place {
                Some(m) => self.counts[m.place] += 1,
                None => self.no_file += 1,
            }
        }
    }

    pub fn finish(self) -> CpuShares {
        let mut elsewhere: Vec<PlaceShare> = (self.places.into_iter().zip(self.counts))
            .map(|(place, samples)| PlaceShare { place, samples })
            .chain([
                PlaceShare {
                    place: KERNEL.into(),
                    samples: self.kernel,
                },
                PlaceShare {
                    place: NO_FILE.into(),
                    samples: self.no_file,
                },
            ])
            .filter(|p| p.samples > 0)
            .collect();
        // The most first; ties by name, for the same bytes on every run.
        elsewhere.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.place.cmp(&b.place))
        });
        CpuShares {
            process_samples: self.process_samples,
            binary_samples: self.binary_samples,
            elsewhere,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_go_to_the_kernel_the_binary_or_the_mapped_file() {
        let mut c = PlaceCounter::default();
        c.map(7, 0x1000, 0x1000, b"/lib/libc.so.6");
        c.map(7, 0x3000, 0x1000, b"/lib/libz.so.1");
        c.count(7, true, Some(0x1800), false);
        c.count(7, true, Some(0x1900), false);
        c.count(7, true, Some(0x3100), false);
        c.count(7, false, None, false);
        c.count(7, true, Some(0x5000), false);
        c.count(7, true, Some(0x9000), true);
        // A fork sees its parent's mappings; an exec forgets them.
        c.fork(7, 8);
        c.count(8, true, Some(0x3200), false);
        c.exec(8);
        c.count(8, true, Some(0x3200), false);
        // A new mapping over an old one replaces it.
        c.map(7, 0x3000, 0x800, b"/lib/libm.so.6");
        c.count(7, true, Some(0x3100), false);
        let s = c.finish();
        assert_eq!((s.process_samples, s.binary_samples), (9, 1));
        let places: Vec<(&str, u64)> = (s.elsewhere.iter())
            .map(|p| (p.place.as_str(), p.samples))
            .collect();
        assert_eq!(
            places,
            [
                ("/lib/libc.so.6", 2),
                ("/lib/libz.so.1", 2),
                ("[no file]", 2),
                ("/lib/libm.so.6", 1),
                ("[kernel]", 1),
            ]
        );
        assert!((s.binary_fraction() - 1.0 / 9.0).abs() < 1e-9);
        // The profile's header carries them to `doctor --profile`.
        let mut graph = Graph::read("# hottext profile v2\nfn main 8 1\n".as_bytes()).unwrap();
        s.write_headers(&mut graph);
        assert_eq!(graph.header(header::PROCESS_SAMPLES), Some("9"));
        assert_eq!(CpuShares::from_headers(&graph), Some(s));
    }
}
