//! What hottext asks of the operating system, in one place: CPU sets and pinning, processes as
//! `/proc` shows them, shell words, and files replaced atomically.

pub mod cpus;
pub mod files;
pub mod group;
pub mod proc;
pub mod shell;
