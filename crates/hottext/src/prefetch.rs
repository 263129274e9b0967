//! A hint to the CPU, for the loops over arrays of hundreds of megabytes in random order
//! (ordering, and writing the linker inputs of an order), which otherwise wait on every read.

/// How many places ahead a walk over a list of random reads starts the next one: enough for
/// several to be in flight, few enough that they arrive before they are needed.
pub(crate) const DISTANCE: usize = 8;

/// Asks the CPU to start loading `value`'s cache line; a hint, with no effect on results.
#[inline]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault; `value` is a live
    // reference anyway. SSE, which the instruction needs, is part of x86-64.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            value as *const T as *const i8,
        )
    }
}
