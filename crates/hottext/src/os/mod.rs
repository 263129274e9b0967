//! What hottext asks of the operating system, in one place: CPU sets and pinning, processes as
//! `/proc` shows them, process groups and the scope of a command's processes (daemons
//! included), shell words, files replaced atomically, and huge pages for our own large buffers.

pub mod cpus;
pub mod files;
pub mod group;
pub mod huge_heap;
pub mod proc;
pub mod scope;
pub mod shell;
pub mod watchdog;
