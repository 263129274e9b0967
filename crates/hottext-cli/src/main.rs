//! The `hottext` binary: the allocator, then the command (`hottext_cli::main`).

use std::process::ExitCode;

/// Large buffers on huge pages: ordering a large profile reads them at random
/// (`hottext::os::huge_heap`).
#[global_allocator]
static ALLOCATOR: hottext::os::huge_heap::HugeHeap = hottext::os::huge_heap::HugeHeap;

fn main() -> ExitCode {
    hottext_cli::main()
}
