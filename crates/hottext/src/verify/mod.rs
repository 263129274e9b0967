//! Is the hot text there: in a binary's symbols, and on huge pages in a running process.

mod binary;
mod planned;
mod process;

pub(crate) use binary::mappable_hot_pages;
pub use binary::{check_binary, HotTextReport};
pub use planned::PlanReport;
pub use process::{check_process, Backing, PageReport, ProcessError, ProcessReport};
