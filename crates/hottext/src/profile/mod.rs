//! From a running program to a call graph: `record` runs perf, the rest reads perf.data.
