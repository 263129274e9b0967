//! Repairing what frame-pointer unwinding gets wrong at the edges of a function (x86-64).
//!
//! perf finds the caller of the sampled function through `%rbp`. While the sampled function has
//! no frame of its own (at its entry, before `push %rbp; mov %rsp,%rbp`; at its `ret`, after the
//! frame is popped; or throughout a leaf that gcc 12 built without one, as it does for leaves
//! that use no stack even with `-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer`), `%rbp` is
//! still its caller's frame, so the second frame perf reports is the caller's caller and the edge
//! skips a level. Front-end-bound programs stall at function entries, so such samples are many
//! (about half of the demo service's).
//!
//! The second frame is then the return address of the call that entered the real caller;
//! `callers.rs` follows that call to the sampled function. This file only tells whether the
//! sampled instruction ran with the function's own frame. On other architectures edges are
//! taken as perf gives them.

use super::code::Code;
use crate::binary::{Function, StatedAddr};

/// `push %rbp; mov %rsp,%rbp`: the frame is set up after these 4 bytes.
const PUSH_MOV_RBP: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];
/// `endbr64`, which `-fcf-protection` puts before the prologue.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// `ret`, `ret imm16`, and `repz ret` (an old AMD branch-predictor idiom).
const RET: u8 = 0xc3;
const RET_IMM16: u8 = 0xc2;
const REPZ: u8 = 0xf3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    NotLookedAt,
    /// The frame is set up from this many bytes into the function.
    After(u8),
    /// No `push %rbp; mov %rsp,%rbp` at the entry: a leaf without a frame (or a prologue
    /// further in, which the caller's direct call then reveals).
    Never,
    /// Its bytes could not be read: take the edge as unwound.
    Unreadable,
}

/// What we learnt of each function's prologue.
pub(crate) struct Frames {
    setup: Vec<Setup>,
}

impl Frames {
    pub fn new(functions: usize) -> Frames {
        Frames {
            setup: vec![Setup::NotLookedAt; functions],
        }
    }

    /// Whether function `f` (`func`), sampled at `ip`, ran with its own frame, so that the
    /// unwound return address is its own. Without code to decode, it is taken as unwound.
    pub(crate) fn has_own_frame(
        &mut self,
        code: &Code<'_>,
        f: usize,
        func: &Function,
        ip: StatedAddr,
    ) -> bool {
        if !code.is_decoded() {
            return true;
        }
        if self.setup[f] == Setup::NotLookedAt {
            let entry = code.bytes(func.start.0, ENDBR64.len() + PUSH_MOV_RBP.len());
            self.setup[f] = if entry.is_empty() {
                Setup::Unreadable
            } else {
                prologue(entry)
            };
        }
        match self.setup[f] {
            Setup::After(n) => ip.0 - func.start.0 >= u64::from(n) && !at_return(code, ip.0),
            Setup::Never => false,
            Setup::NotLookedAt | Setup::Unreadable => true,
        }
    }
}

fn at_return(code: &Code<'_>, ip: u64) -> bool {
    matches!(code.bytes(ip, 2), [RET, ..] | [RET_IMM16, ..] | [REPZ, RET])
}

fn prologue(entry: &[u8]) -> Setup {
    let body = entry.strip_prefix(&ENDBR64[..]).unwrap_or(entry);
    let skipped = (entry.len() - body.len()) as u8;
    if body.starts_with(&PUSH_MOV_RBP) {
        Setup::After(skipped + PUSH_MOV_RBP.len() as u8)
    } else {
        Setup::Never
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At 0x1000: L: push %rbp; mov %rsp,%rbp; nop; pop %rbp; ret (frame set up at +4);
    /// at 0x1020: LEAF: mov %rdi,%rax; ret (no frame).
    fn code() -> (Code<'static>, Vec<Function>) {
        let mut bytes = vec![0x90u8; 0x40];
        bytes[..4].copy_from_slice(&PUSH_MOV_RBP);
        bytes[4..7].copy_from_slice(&[0x90, 0x5d, RET]);
        bytes[0x20..0x24].copy_from_slice(&[0x48, 0x89, 0xf8, RET]);
        let func = |start: u64| Function {
            start: StatedAddr(start),
            size: 0x20,
            name: "f".into(),
            aliases: vec![],
        };
        (
            Code::Segments(vec![(0x1000, bytes.leak())]),
            vec![func(0x1000), func(0x1020)],
        )
    }

    #[test]
    fn a_frame_exists_between_the_prologue_and_the_ret() {
        let (code, f) = code();
        let mut fr = Frames::new(f.len());
        let own = |fr: &mut Frames, ip| fr.has_own_frame(&code, 0, &f[0], StatedAddr(ip));
        assert!(!own(&mut fr, 0x1000), "entry");
        assert!(!own(&mut fr, 0x1001), "after push");
        assert!(own(&mut fr, 0x1004), "body");
        assert!(own(&mut fr, 0x1005), "pop");
        assert!(!own(&mut fr, 0x1006), "ret, after the pop");
    }

    #[test]
    fn a_leaf_without_prologue_never_has_a_frame() {
        let (code, f) = code();
        let mut fr = Frames::new(f.len());
        assert!(!fr.has_own_frame(&code, 1, &f[1], StatedAddr(0x1022)));
    }

    #[test]
    fn without_code_every_frame_is_taken_as_unwound() {
        let (_, f) = code();
        let mut fr = Frames::new(f.len());
        assert!(fr.has_own_frame(&Code::None, 1, &f[1], StatedAddr(0x1020)));
    }

    #[test]
    fn recognises_gcc_prologues() {
        assert_eq!(
            prologue(&[0x55, 0x48, 0x89, 0xe5, 0x41, 0x54]),
            Setup::After(4)
        );
        assert_eq!(
            prologue(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5]),
            Setup::After(8)
        );
        assert_eq!(
            prologue(&[0x48, 0x89, 0xf8, 0xba, 0x32, 0, 0, 0]),
            Setup::Never
        );
        assert_eq!(prologue(&[]), Setup::Never);
    }
}
