//! Two pieces of work at once, for the steps that split in two (the candidates of `--algorithm
//! auto`, cdsort's set-up, formatting a large script): on a small machine the second CPU is
//! otherwise idle.

use std::sync::{Mutex, PoisonError};

/// Runs `a` on a thread of its own while `b` runs on this one, and returns both results. When
/// no thread can be started (a limit on processes or memory), `a` runs here after `b`: slower,
/// never a failure. A panic in `a` is passed on as if it had happened here.
pub(crate) fn join<A: Send, B>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (A, B) {
    join_on(std::thread::Builder::new(), a, b)
}

/// [`join`] with the thread made by `builder`.
fn join_on<A: Send, B>(
    builder: std::thread::Builder,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (A, B) {
    // Not moved into the thread: a thread that cannot start would take `a` with it.
    let slot = Mutex::new(Some(a));
    let run_if_left = || {
        let a = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        a.map(|a| a())
    };
    std::thread::scope(|scope| {
        let thread = builder.spawn_scoped(scope, run_if_left);
        let b = b();
        let on_thread = thread.ok().and_then(|t| {
            t.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        let a = on_thread
            .or_else(run_if_left)
            .expect("`a` ran on the thread, or it is still in its slot");
        (a, b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_run_once_and_a_panic_on_the_thread_comes_back() {
        let (a, b) = join(
            || std::thread::current().id(),
            || std::thread::current().id(),
        );
        assert_ne!(a, b, "a ran on a thread of its own");
        let caught = std::panic::catch_unwind(|| join(|| panic!("in a"), || 1));
        let panic = caught.unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"in a"));
    }

    #[test]
    fn without_a_thread_both_run_here() {
        // No thread gets a stack of an exabyte.
        let builder = std::thread::Builder::new().stack_size(1 << 60);
        let here = std::thread::current().id();
        let (a, b) = join_on(builder, || std::thread::current().id(), || 7);
        assert_eq!((a, b), (here, 7));
    }
}
