//! Is the hot text there: in a binary's symbols, and on huge pages in a running process.

mod binary;
mod planned;
mod process;

pub use binary::{check_binary, mappable_hot_pages, HotTextReport};
pub use planned::{compare_with_plan, PlanReport};
pub use process::{check_process, Backing, PageReport, ProcessError, ProcessReport};
