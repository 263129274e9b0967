//! One step of unwinding by the binary's call frame information (CFI), for samples recorded with
//! `perf record --call-graph dwarf`: those carry the user registers and a copy of the top of the
//! user stack instead of a user call chain. The graph needs only the innermost frame and its
//! return address, so one step from the sampled instruction is enough.
//!
//! framehop (samply's unwinder) reads `.eh_frame` (through `.eh_frame_hdr`) or `.debug_frame`
//! and falls back to frame pointers where a function has no CFI. The binary is given to it once,
//! at its stated addresses with no bias, so that one module serves every process: the sampled
//! instruction is passed as its stated address, while the stack pointer and the stack's bytes
//! stay runtime values, and so does the return address read from them (the caller turns it into
//! a stated address through the process's mappings, as any other). The rule cache lives as long
//! as the reader: a program repeats the same few instructions.
//!
//! Unlike a frame-pointer chain, CFI describes every instruction, prologues and epilogues
//! included, so the return address is the real caller's.

use framehop::aarch64::{CacheAarch64, PtrAuthMask, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{Error, ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use object::{Object, ObjectSection};

use super::sample::UserRegs;
use crate::binary::Binary;

/// What one unwinding step from the sampled instruction found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The return address into the caller (a runtime address).
    Returns(u64),
    /// The outermost frame (`_start`, or CFI marking the end of the stack): no caller.
    Outermost,
    /// The return address lies beyond the copied stack (perf copies a fixed amount).
    StackTooShort,
    /// The sample lacks a register the step needs, or the rule made no progress.
    Failed,
}

/// The binary's unwinder with its rule cache, for its architecture.
pub(crate) enum CfiUnwinder {
    X86_64(UnwinderX86_64<Vec<u8>>, Box<CacheX86_64>),
    Aarch64(UnwinderAarch64<Vec<u8>>, Box<CacheAarch64>),
}

impl CfiUnwinder {
    /// `None` for architectures we do not unwind, or when the ELF cannot be read again.
    pub fn new(binary: &Binary) -> Option<CfiUnwinder> {
        let module = module(binary)?;
        match binary.architecture {
            object::Architecture::X86_64 => {
                let mut unwinder = UnwinderX86_64::new();
                unwinder.add_module(module);
                Some(CfiUnwinder::X86_64(unwinder, Box::new(CacheX86_64::new())))
            }
            object::Architecture::Aarch64 => {
                let mut unwinder = UnwinderAarch64::new();
                unwinder.add_module(module);
                Some(CfiUnwinder::Aarch64(
                    unwinder,
                    Box::new(CacheAarch64::new()),
                ))
            }
            _ => None,
        }
    }

    /// Unwinds one frame from `stated_ip` (the sampled instruction, in the binary) with the
    /// sample's registers and its copy of the stack, which starts at the stack pointer.
    pub fn step(&mut self, stated_ip: u64, regs: &UserRegs, stack: &[u8]) -> Step {
        let Some(n) = regs.numbers else {
            return Step::Failed;
        };
        let Some(sp) = regs.get(n.sp) else {
            return Step::Failed;
        };
        let mut read_stack = |addr: u64| read_word(stack, sp, addr);
        let pc = FrameAddress::InstructionPointer(stated_ip);
        let result = match self {
            CfiUnwinder::X86_64(unwinder, cache) => {
                let Some(bp) = regs.get(n.fp) else {
                    return Step::Failed;
                };
                let mut r = UnwindRegsX86_64::new(stated_ip, sp, bp);
                unwinder.unwind_frame(pc, &mut r, cache, &mut read_stack)
            }
            CfiUnwinder::Aarch64(unwinder, cache) => {
                let (Some(fp), Some(lr)) = (regs.get(n.fp), n.lr.and_then(|lr| regs.get(lr)))
                else {
                    return Step::Failed;
                };
                let mut r =
                    UnwindRegsAarch64::new_with_ptr_auth_mask(USER_ADDRESS_BITS, lr, sp, fp);
                unwinder.unwind_frame(pc, &mut r, cache, &mut read_stack)
            }
        };
        match result {
            Ok(Some(ret)) if ret != 0 => Step::Returns(ret),
            Ok(_) => Step::Outermost,
            Err(Error::CouldNotReadStack(_)) => Step::StackTooShort,
            Err(_) => Step::Failed,
        }
    }
}

/// Linux arm64 user addresses fit in 48 bits; pointer authentication signs return addresses
/// in the bits above, which must go before the address is used.
const USER_ADDRESS_BITS: PtrAuthMask = PtrAuthMask((1 << 48) - 1);

/// The u64 at runtime address `addr`, from the stack copy that starts at `sp`.
fn read_word(stack: &[u8], sp: u64, addr: u64) -> Result<u64, ()> {
    let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
    let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    // Stacks of the architectures we unwind are little-endian.
    Ok(u64::from_le_bytes(word))
}

/// The binary as a framehop module at its stated addresses (bias 0).
fn module(binary: &Binary) -> Option<Module<Vec<u8>>> {
    let file = object::File::parse(binary.bytes()).ok()?;
    let range = |name: &str| {
        file.section_by_name(name)
            .map(|s| s.address()..s.address().saturating_add(s.size()))
    };
    let data = |name: &str| {
        file.section_by_name(name)
            .and_then(|s| s.data().ok())
            .map(<[u8]>::to_vec)
    };
    let start = binary.exec_segments.iter().map(|s| s.start.0).min()?;
    let end = binary
        .exec_segments
        .iter()
        .map(|s| s.start.0.saturating_add(s.mem_size))
        .max()?;
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: range(".text"),
        eh_frame_svma: range(".eh_frame"),
        eh_frame: data(".eh_frame"),
        eh_frame_hdr_svma: range(".eh_frame_hdr"),
        eh_frame_hdr: data(".eh_frame_hdr"),
        debug_frame: data(".debug_frame"),
        got_svma: range(".got"),
        ..Default::default()
    };
    let name = binary.path.to_string_lossy().into_owned();
    Some(Module::new(name, start..end, 0, info))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::sample::RegNumbers;

    fn words(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// At a function's first instruction its return address is at the stack pointer: the
    /// CFI of the test binary itself must say so, and the step must read it from the copy.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn steps_from_a_function_entry_to_the_return_address_on_the_stack() {
        let binary = Binary::open(&std::env::current_exe().unwrap()).unwrap();
        let entry = binary
            .functions
            .iter()
            .find(|f| f.name.contains("9read_word"))
            .expect("read_word in the test binary")
            .start
            .0;
        let mut unwinder = CfiUnwinder::new(&binary).expect("an x86-64 unwinder");
        let x86_64 = RegNumbers::of(object::Architecture::X86_64);
        // bp (6), sp (7) and ip (8), in bit order.
        let sp = 0x7ffe_1000;
        let values = words(&[0x5555, sp, entry]);
        let regs = UserRegs::from_bytes(0b1_1100_0000, x86_64, &values);
        let stack = words(&[0x5555_0000_1234, 0]);
        for _ in 0..2 {
            // The second time from the rule cache.
            let step = unwinder.step(entry, &regs, &stack);
            assert_eq!(step, Step::Returns(0x5555_0000_1234));
        }
        assert_eq!(
            unwinder.step(entry, &regs, &stack[..4]),
            Step::StackTooShort
        );
        let without_sp = words(&[0x5555, entry]);
        let regs = UserRegs::from_bytes(0b1_0100_0000, x86_64, &without_sp);
        assert_eq!(unwinder.step(entry, &regs, &stack), Step::Failed);
    }

    #[test]
    fn stack_words_are_read_only_inside_the_copy() {
        let stack = words(&[7, 9]);
        let sp = 0x7ffe_0000;
        assert_eq!(read_word(&stack, sp, sp), Ok(7));
        assert_eq!(read_word(&stack, sp, sp + 8), Ok(9));
        assert_eq!(read_word(&stack, sp, sp + 9), Err(()), "runs past the copy");
        assert_eq!(
            read_word(&stack, sp, sp - 8),
            Err(()),
            "below the stack pointer"
        );
        assert_eq!(read_word(&stack, u64::MAX, 3), Err(()));
        assert_eq!(read_word(&stack, 0, u64::MAX), Err(()));
    }
}
