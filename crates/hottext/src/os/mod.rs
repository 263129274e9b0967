//! What hottext asks of the operating system, in one place: CPU sets and pinning, processes as
//! `/proc` shows them, the kernel's settings as `/proc/sys` and `/sys` show them, process groups
//! and the scope of a command's processes (daemons included), signals as a cancel flag, shell
//! words, files replaced atomically, files dropped from the page cache, and huge pages for our
//! own large buffers.

pub mod cancel;
pub mod cpus;
pub mod files;
pub(crate) mod group;
pub mod huge_heap;
pub(crate) mod mappings;
pub mod page_cache;
pub mod proc;
pub(crate) mod scope;
pub mod shell;
pub(crate) mod sys;
pub(crate) mod watchdog;
