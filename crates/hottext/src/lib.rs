//! hottext: profile-guided hot-text layout for Linux services.
//!
//! The modules are the stages of the pipeline, in order:
//!
//! 1. [`profile`]: run `perf`, read `perf.data`, map samples to functions, build the call graph.
//! 2. [`graph`]: the weighted, directed call graph, its reviewable text format, and what is
//!    computed on graphs alone (merging two profiles, the drift between them).
//! 3. [`layout`]: order the hot functions (C3, Pettis-Hansen, CDSort, auto) and score a layout.
//! 4. [`link`]: which functions reach the linker and what each linker needs to place them in a
//!    2 MiB-aligned hot range; the runtime's ranges file.
//! 5. [`verify`]: check that a binary has the hot range.
//! 6. [`measure`]: hardware counters, interleaved A/B runs, statistics and a verdict.
//! 7. [`store`], [`pipeline`]: the profile store, the meta file, the weekly refresh, the build's fetch.
//!
//! [`binary`] holds the ELF facts the stages share (names, build-id, code fingerprints), [`caches`]
//! the geometry of the instruction caches and TLBs the layout model and the simulation share, [`os`]
//! what they ask of the operating system (every `/proc` and `/sys` read, CPU sets, processes,
//! signals, shell words, atomic writes),
//! [`demangle`] and [`listing`] the words people read (names, short lists in messages);
//! `fuzz` the fuzz targets' bodies.
//!
//! ```
//! use hottext::graph::Graph;
//! use hottext::layout::{algorithm, order, Params};
//!
//! let profile = "# hottext profile v1\nfn main 64 1\nfn work 32 9\ncall main work 9\n";
//! let graph = Graph::read(profile.as_bytes()).unwrap();
//! let order = order(&graph, algorithm("c3").unwrap(), &Params::default());
//! let names: Vec<&str> = order.iter().map(|&f| graph.funcs()[f].name.as_str()).collect();
//! assert_eq!(names, ["main", "work"]);
//! ```

#![warn(missing_docs)]

pub mod binary;
pub mod caches;
pub mod demangle;
pub mod diagnose;
#[doc(hidden)]
pub mod fuzz;
pub mod graph;
pub mod layout;
pub mod link;
pub mod listing;
pub mod measure;
pub mod os;
mod parallel;
pub mod pipeline;
mod prefetch;
pub mod profile;
pub mod report;
pub mod store;
pub mod tune;
pub mod verify;
