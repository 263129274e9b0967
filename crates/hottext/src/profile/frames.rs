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
//! The second frame is then the return address of the call that entered the real caller; when
//! that call is direct (`e8 rel32`) its target is the real caller. When it is a direct call of
//! the sampled function itself, the frame was set up after all (a prologue we did not
//! recognise). A caller entered through a pointer cannot be recovered: no edge, counted.
//! On other architectures edges are taken as perf gives them.
//!
//! Such a stack holds no return address into the real caller, so it does not say where in the
//! caller the call sits. When the caller has one direct call of the sampled function, that is
//! the site; with several, or none (a call through a pointer), the site stays unknown. (A caller
//! that calls the function both directly and through a pointer would have the pointer's calls
//! put at the direct one: rare, and at worst one call's distance off.)

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use foldhash::HashMap;

use crate::binary::{Binary, Function, StatedAddr};

/// `push %rbp; mov %rsp,%rbp`: the frame is set up after these 4 bytes.
const PUSH_MOV_RBP: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];
/// `endbr64`, which `-fcf-protection` puts before the prologue.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// `call rel32`: opcode and 4-byte displacement from the next instruction.
const CALL_REL32: u8 = 0xe8;
const CALL_REL32_LEN: u64 = 5;
/// `ret`, `ret imm16`, and `repz ret` (an old AMD branch-predictor idiom).
const RET: u8 = 0xc3;
const RET_IMM16: u8 = 0xc2;
const REPZ: u8 = 0xf3;

/// Who called the sampled function, as far as the code tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// The frame was set up: the function holding the return address is the caller.
    AsUnwound,
    /// The frame was not set up; the caller starts here (the target of the direct call before
    /// the return address).
    Recovered(StatedAddr),
    /// The frame was not set up and the caller was entered through a pointer.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    NotLookedAt,
    /// The frame is set up from this many bytes into the function.
    After(u8),
    /// No `push %rbp; mov %rsp,%rbp` at the entry: a leaf without a frame (or a prologue
    /// further in, which the direct-call check then recognises).
    Never,
    /// Its bytes could not be read: take the edge as unwound.
    Unreadable,
}

/// The binary's executable bytes, and what we learnt of each function's prologue.
pub(crate) struct Frames {
    code: Code,
    setup: Vec<Setup>,
    /// Per function decoded so far: (target, last byte) of its `call rel32`s, by target.
    direct_calls: HashMap<usize, Vec<(u64, u64)>>,
}

impl Frames {
    /// Repairs edges of x86-64 binaries; other binaries get none.
    pub fn new(binary: &Binary) -> io::Result<Frames> {
        let code = if binary.architecture == object::Architecture::X86_64 {
            let file = File::open(&binary.path)?;
            let mut segments = Vec::new();
            for seg in &binary.exec_segments {
                let mut bytes = vec![0u8; seg.file_size as usize];
                file.read_exact_at(&mut bytes, seg.offset.0)?;
                segments.push((seg.start.0, bytes));
            }
            Code::Segments(segments)
        } else {
            Code::None
        };
        Ok(Frames {
            code,
            setup: vec![Setup::NotLookedAt; binary.functions.len()],
            direct_calls: HashMap::default(),
        })
    }

    /// The last byte of the only `call rel32` of `callee` in function `f` (`func`), if it has
    /// exactly one: the call site of a [`Caller::Recovered`] caller. Each function is decoded
    /// once, on first need.
    pub fn only_direct_call(
        &mut self,
        f: usize,
        func: &Function,
        callee: StatedAddr,
    ) -> Option<StatedAddr> {
        let code = &self.code;
        let calls = self.direct_calls.entry(f).or_insert_with(|| {
            let bytes = code.bytes(func.start.0, func.size as usize);
            let mut calls = direct_calls(bytes, func.start.0);
            calls.sort_unstable();
            calls
        });
        let first = calls.partition_point(|&(target, _)| target < callee.0);
        let mut of_callee = calls[first..]
            .iter()
            .take_while(|&&(target, _)| target == callee.0);
        match (of_callee.next(), of_callee.next()) {
            (Some(&(_, site)), None) => Some(StatedAddr(site)),
            _ => None,
        }
    }

    /// Who called function `f` (`func`), sampled at `ip`, given the return address `ret` that
    /// unwinding found as the next frame.
    pub fn caller(&mut self, f: usize, func: &Function, ip: StatedAddr, ret: StatedAddr) -> Caller {
        if matches!(self.code, Code::None) {
            return Caller::AsUnwound;
        }
        if self.frame_set_up(f, func, ip) {
            return Caller::AsUnwound;
        }
        match self.direct_call_before(ret) {
            // The frame was set up after all (a prologue further in than the entry).
            Some(t) if t == func.start => Caller::AsUnwound,
            Some(t) => Caller::Recovered(t),
            None => Caller::Unknown,
        }
    }

    fn frame_set_up(&mut self, f: usize, func: &Function, ip: StatedAddr) -> bool {
        if self.setup[f] == Setup::NotLookedAt {
            let entry = self
                .code
                .bytes(func.start.0, ENDBR64.len() + PUSH_MOV_RBP.len());
            self.setup[f] = if entry.is_empty() {
                Setup::Unreadable
            } else {
                prologue(entry)
            };
        }
        match self.setup[f] {
            Setup::After(n) => ip.0 - func.start.0 >= u64::from(n) && !self.at_return(ip.0),
            Setup::Never => false,
            Setup::NotLookedAt | Setup::Unreadable => true,
        }
    }

    fn at_return(&self, ip: u64) -> bool {
        matches!(
            self.code.bytes(ip, 2),
            [RET, ..] | [RET_IMM16, ..] | [REPZ, RET]
        )
    }

    /// The target of the `call rel32` that ends at `ret`, if that is what precedes it.
    fn direct_call_before(&self, ret: StatedAddr) -> Option<StatedAddr> {
        let at = ret.0.checked_sub(CALL_REL32_LEN)?;
        match self.code.bytes(at, CALL_REL32_LEN as usize) {
            [CALL_REL32, d0, d1, d2, d3] => {
                let rel = i32::from_le_bytes([*d0, *d1, *d2, *d3]);
                Some(StatedAddr(ret.0.wrapping_add_signed(i64::from(rel))))
            }
            _ => None,
        }
    }
}

/// The binary's executable segments, read whole: the look-ups are random accesses all over a
/// big text, which plain memory serves far faster than reads or a page cache.
enum Code {
    /// Not x86-64: nothing to read.
    None,
    /// `(stated start, bytes)` of each executable segment.
    Segments(Vec<(u64, Vec<u8>)>),
}

impl Code {
    /// Up to `n` code bytes at `addr`: fewer at the end of a segment, none outside the code.
    fn bytes(&self, addr: u64, n: usize) -> &[u8] {
        let Code::Segments(segments) = self else {
            return &[];
        };
        for (start, bytes) in segments {
            if let Some(at) = addr
                .checked_sub(*start)
                .filter(|&at| at < bytes.len() as u64)
            {
                let at = at as usize;
                return &bytes[at..(at + n).min(bytes.len())];
            }
        }
        &[]
    }
}

/// (target, last byte) of each `call rel32` in `bytes`, which start at stated address `at`.
fn direct_calls(bytes: &[u8], at: u64) -> Vec<(u64, u64)> {
    use iced_x86::{Decoder, DecoderOptions, Instruction};
    let mut decoder = Decoder::with_ip(64, bytes, at, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    let mut calls = Vec::new();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        if insn.code() == iced_x86::Code::Call_rel32_64 {
            calls.push((insn.near_branch_target(), insn.next_ip() - 1));
        }
    }
    calls
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

    /// Code at 0x1000:
    ///   0x1000 P:    push %rbp; mov %rsp,%rbp; call L (0x1020); pop %rbp; ret
    ///   0x1020 L:    push %rbp; mov %rsp,%rbp; nop; pop %rbp; ret      (frame set up at +4)
    ///   0x1040 LEAF: mov %rdi,%rax; ret                                 (no frame)
    ///   0x1060 G:    push %rbp; mov %rsp,%rbp; call P; call LEAF; call *%rax; pop %rbp; ret
    fn code() -> (Frames, Vec<Function>) {
        let mut bytes = vec![0x90u8; 0x80];
        let mut put = |at: usize, b: &[u8]| bytes[at..at + b.len()].copy_from_slice(b);
        let call = |from_next: u64, to: u64| {
            let rel = (to as i64 - from_next as i64) as i32;
            let mut b = vec![CALL_REL32];
            b.extend_from_slice(&rel.to_le_bytes());
            b
        };
        put(0x00, &PUSH_MOV_RBP);
        put(0x04, &call(0x1009, 0x1020));
        put(0x09, &[0x5d, RET]);
        put(0x20, &PUSH_MOV_RBP);
        put(0x24, &[0x90, 0x5d, RET]);
        put(0x40, &[0x48, 0x89, 0xf8, RET]);
        put(0x60, &PUSH_MOV_RBP);
        put(0x64, &call(0x1069, 0x1000));
        put(0x69, &call(0x106e, 0x1040));
        put(0x6e, &[0xff, 0xd0, 0x5d, RET]); // call *%rax
        let func = |start: u64, name: &str| Function {
            start: StatedAddr(start),
            size: 0x20,
            name: name.into(),
            aliases: vec![],
        };
        let funcs = vec![
            func(0x1000, "P"),
            func(0x1020, "L"),
            func(0x1040, "LEAF"),
            func(0x1060, "G"),
        ];
        let frames = Frames {
            code: Code::Segments(vec![(0x1000, bytes)]),
            setup: vec![Setup::NotLookedAt; funcs.len()],
            direct_calls: HashMap::default(),
        };
        (frames, funcs)
    }

    const AFTER_CALL_L_IN_P: StatedAddr = StatedAddr(0x1009);
    const AFTER_CALL_P_IN_G: StatedAddr = StatedAddr(0x1069);
    const AFTER_CALL_LEAF_IN_G: StatedAddr = StatedAddr(0x106e);
    const AFTER_CALL_RAX_IN_G: StatedAddr = StatedAddr(0x1070);

    #[test]
    fn body_of_a_function_with_a_frame_is_as_unwound() {
        let (mut fr, f) = code();
        assert_eq!(
            fr.caller(1, &f[1], StatedAddr(0x1024), AFTER_CALL_L_IN_P),
            Caller::AsUnwound
        );
    }

    #[test]
    fn entry_before_the_prologue_recovers_the_caller_from_the_grandparents_call() {
        let (mut fr, f) = code();
        // Sampled at L's first byte: unwinding skipped P and found G's return address.
        assert_eq!(
            fr.caller(1, &f[1], StatedAddr(0x1020), AFTER_CALL_P_IN_G),
            Caller::Recovered(StatedAddr(0x1000))
        );
        assert_eq!(
            fr.caller(1, &f[1], StatedAddr(0x1021), AFTER_CALL_P_IN_G),
            Caller::Recovered(StatedAddr(0x1000))
        );
    }

    #[test]
    fn at_ret_after_the_frame_is_popped_recovers_too() {
        let (mut fr, f) = code();
        assert_eq!(
            fr.caller(1, &f[1], StatedAddr(0x1026), AFTER_CALL_P_IN_G),
            Caller::Recovered(StatedAddr(0x1000))
        );
    }

    #[test]
    fn frameless_leaf_recovers_or_is_verified_by_a_direct_call_to_itself() {
        let (mut fr, f) = code();
        assert_eq!(
            fr.caller(2, &f[2], StatedAddr(0x1043), AFTER_CALL_P_IN_G),
            Caller::Recovered(StatedAddr(0x1000))
        );
        // G called LEAF directly: the return address already names the right caller.
        assert_eq!(
            fr.caller(2, &f[2], StatedAddr(0x1043), AFTER_CALL_LEAF_IN_G),
            Caller::AsUnwound
        );
    }

    #[test]
    fn recovered_callers_site_is_its_only_direct_call_of_the_function() {
        let (mut fr, f) = code();
        // P calls L once, from 0x1004..0x1009.
        assert_eq!(
            fr.only_direct_call(0, &f[0], f[1].start),
            Some(StatedAddr(0x1008))
        );
        // G calls LEAF once directly; it never calls L.
        assert_eq!(
            fr.only_direct_call(3, &f[3], f[2].start),
            Some(StatedAddr(0x106d))
        );
        assert_eq!(fr.only_direct_call(3, &f[3], f[1].start), None);
        // Two direct calls of one function: which one ran is unknown.
        let mut twice = vec![0x90u8; 0x20];
        for at in [0usize, 5] {
            twice[at] = CALL_REL32;
            let rel = (0x1100i64 - (0x2000 + at as i64 + 5)) as i32;
            twice[at + 1..at + 5].copy_from_slice(&rel.to_le_bytes());
        }
        assert_eq!(direct_calls(&twice, 0x2000).len(), 2);
        fr.direct_calls.insert(9, direct_calls(&twice, 0x2000));
        assert_eq!(fr.only_direct_call(9, &f[0], StatedAddr(0x1100)), None);
    }

    #[test]
    fn caller_entered_through_a_pointer_is_unknown() {
        let (mut fr, f) = code();
        assert_eq!(
            fr.caller(1, &f[1], StatedAddr(0x1020), AFTER_CALL_RAX_IN_G),
            Caller::Unknown
        );
    }

    #[test]
    fn no_code_means_no_repair() {
        let (_, f) = code();
        let mut fr = Frames {
            code: Code::None,
            setup: vec![Setup::NotLookedAt; f.len()],
            direct_calls: HashMap::default(),
        };
        assert_eq!(
            fr.caller(1, &f[1], StatedAddr(0x1020), AFTER_CALL_P_IN_G),
            Caller::AsUnwound
        );
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
