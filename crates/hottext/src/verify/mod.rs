//! Is the hot text there: in a binary's symbols, and (later) on huge pages in a running process.

mod binary;

pub use binary::{check_binary, HotTextReport};
