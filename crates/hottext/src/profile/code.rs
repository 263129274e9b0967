//! The binary's machine code, as far as the call graph needs it (x86-64): the call before a
//! return address, what kind of branch an instruction is, and the direct calls and jumps by
//! which a function hands control to another.
//!
//! Stack samples name return addresses and branch records name branch instructions; the code
//! at those addresses says what really happened there: a `call`, a jump within a function, a
//! tail call (a `jmp` to another function's entry, which leaves no frame behind), or a return.

use iced_x86::{Code as Opcode, Decoder, DecoderOptions, FlowControl, Instruction, Register};

use crate::binary::{Binary, Function};

/// `call rel32`: opcode and 4-byte displacement from the next instruction.
const CALL_REL32: u8 = 0xe8;
const CALL_REL32_LEN: u64 = 5;
/// The longest x86-64 instruction.
const MAX_INSN: usize = 15;

/// What the instruction at a branch record's source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Branch {
    /// A call, direct or through a pointer.
    Call,
    /// A jump, conditional or not, direct or through a pointer.
    Jump,
    Return,
    /// Not a branch we know (a system call, an interrupt return), or not decodable.
    Other,
}

/// A direct call or jump from a function to an address outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Transfer {
    pub target: u64,
    /// The instruction's last byte: a site of the caller.
    pub site: u64,
    pub is_call: bool,
}

/// The binary's executable segments, in the bytes `Binary::open` read: the look-ups are random
/// accesses all over a big text, which plain memory serves far faster than reads.
pub(crate) enum Code<'a> {
    /// Not x86-64: nothing is decoded, and every edge is taken as recorded.
    None,
    /// `(stated start, bytes)` of each executable segment (as much of it as the file holds).
    Segments(Vec<(u64, &'a [u8])>),
}

impl<'a> Code<'a> {
    pub fn of(binary: &'a Binary) -> Code<'a> {
        if binary.architecture != object::Architecture::X86_64 {
            return Code::None;
        }
        let file = binary.bytes();
        let segments = binary
            .exec_segments
            .iter()
            .map(|seg| {
                // The segment's bounds come from the file: clamp them to it.
                let at = usize::try_from(seg.offset.0)
                    .unwrap_or(usize::MAX)
                    .min(file.len());
                let len = usize::try_from(seg.file_size).unwrap_or(usize::MAX);
                (
                    seg.start.0,
                    &file[at..at.saturating_add(len).min(file.len())],
                )
            })
            .collect();
        Code::Segments(segments)
    }

    pub(crate) fn is_decoded(&self) -> bool {
        matches!(self, Code::Segments(_))
    }

    /// Up to `n` code bytes at `addr`: fewer at the end of a segment, none outside the code.
    pub fn bytes(&self, addr: u64, n: usize) -> &[u8] {
        let Code::Segments(segments) = self else {
            return &[];
        };
        for (start, bytes) in segments {
            if let Some(at) = addr
                .checked_sub(*start)
                .filter(|&at| at < bytes.len() as u64)
            {
                let at = at as usize;
                return &bytes[at..at.saturating_add(n).min(bytes.len())];
            }
        }
        &[]
    }

    /// The target of the `call rel32` that ends at `ret`, if that is what precedes it.
    pub(crate) fn direct_call_before(&self, ret: u64) -> Option<u64> {
        let at = ret.checked_sub(CALL_REL32_LEN)?;
        match self.bytes(at, CALL_REL32_LEN as usize) {
            [CALL_REL32, d0, d1, d2, d3] => {
                let rel = i32::from_le_bytes([*d0, *d1, *d2, *d3]);
                Some(ret.wrapping_add_signed(i64::from(rel)))
            }
            _ => None,
        }
    }

    /// The kind of branch at `addr`; `None` when there is no code to decode.
    pub(crate) fn branch_at(&self, addr: u64) -> Option<Branch> {
        let bytes = self.bytes(addr, MAX_INSN);
        if bytes.is_empty() {
            return None;
        }
        let insn = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE).decode();
        Some(match insn.flow_control() {
            FlowControl::Call | FlowControl::IndirectCall => Branch::Call,
            FlowControl::UnconditionalBranch
            | FlowControl::ConditionalBranch
            | FlowControl::IndirectBranch => Branch::Jump,
            FlowControl::Return => Branch::Return,
            _ => Branch::Other,
        })
    }

    /// The direct calls and jumps of `func` whose target lies outside it, sorted.
    pub(crate) fn transfers_out(&self, func: &Function) -> Vec<Transfer> {
        let (start, end) = (func.start.0, func.end().0);
        let mut out: Vec<Transfer> = self
            .control_flow(func)
            .filter_map(|c| c.transfer())
            .filter(|t| t.target < start || t.target >= end)
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether `func` calls anything, and whether it makes `%rbp` its frame pointer
    /// (`mov %rsp,%rbp` anywhere in it, not only at the entry: gcc schedules other instructions
    /// between `push %rbp` and the `mov`, and shrink-wrapping puts the prologue after an early
    /// return). Only calling functions tell how a binary was built: gcc omits the frame of a
    /// leaf even with `-fno-omit-frame-pointer`, and a build without frame pointers sets one up
    /// only where the stack is sized at run time. `None` when the code cannot be read.
    pub fn frame_use(&self, func: &Function) -> Option<FrameUse> {
        let bytes = self.bytes(func.start.0, func.size as usize);
        if bytes.is_empty() {
            return None;
        }
        let mut decoder = Decoder::with_ip(64, bytes, func.start.0, DecoderOptions::NONE);
        let mut insn = Instruction::default();
        let mut found = FrameUse::default();
        while decoder.can_decode() && !(found.calls && found.sets_up_frame) {
            decoder.decode_out(&mut insn);
            found.calls |= matches!(
                insn.flow_control(),
                FlowControl::Call | FlowControl::IndirectCall
            );
            found.sets_up_frame |= insn.code() == Opcode::Mov_rm64_r64
                && insn.op0_register() == Register::RBP
                && insn.op1_register() == Register::RSP;
        }
        Some(found)
    }

    /// The instructions of `func` that do not simply fall through to the next one, in order.
    pub(crate) fn control_flow<'c>(&'c self, func: &Function) -> impl Iterator<Item = Flow> + 'c {
        let bytes = self.bytes(func.start.0, func.size as usize);
        let mut decoder = Decoder::with_ip(64, bytes, func.start.0, DecoderOptions::NONE);
        let mut insn = Instruction::default();
        std::iter::from_fn(move || {
            while decoder.can_decode() {
                decoder.decode_out(&mut insn);
                let kind = insn.flow_control();
                if kind != FlowControl::Next {
                    return Some(Flow {
                        kind,
                        target: insn.near_branch_target(),
                        next: insn.next_ip(),
                    });
                }
            }
            None
        })
    }
}

/// How a function uses the frame pointer ([`Code::frame_use`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FrameUse {
    pub calls: bool,
    pub sets_up_frame: bool,
}

/// An instruction that changes the flow of control.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flow {
    pub kind: FlowControl,
    /// The direct target (0 when there is none).
    pub target: u64,
    /// The address after it.
    pub next: u64,
}

impl Flow {
    /// A direct call or jump (conditional or not), as a transfer to its target.
    pub fn transfer(self) -> Option<Transfer> {
        let is_call = match self.kind {
            FlowControl::Call => true,
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => false,
            _ => return None,
        };
        Some(Transfer {
            target: self.target,
            site: self.next - 1,
            is_call,
        })
    }
}

/// From this share of calling functions that set up a frame pointer on, the binary counts as
/// built with frame pointers (perf's `--call-graph fp` finds callers); below, not.
pub const FRAME_POINTERS_KEPT: f64 = 0.5;

/// At most this many functions are decoded, evenly spread: a share needs no more, and a
/// binary of a million functions would otherwise be decoded whole before every recording.
const FRAME_SAMPLE: usize = 4000;

/// Share of the binary's calling functions that set up a frame pointer
/// (`Code::frame_use`: leaves go without one even with `-fno-omit-frame-pointer`); `None`
/// where the instruction set is not x86-64 or no function calls another.
pub fn frame_pointer_share(binary: &Binary) -> Option<f64> {
    let code = Code::of(binary);
    if !code.is_decoded() {
        return None;
    }
    let step = binary.functions.len().div_ceil(FRAME_SAMPLE).max(1);
    let (mut with, mut calling) = (0u64, 0u64);
    for f in binary.functions.iter().step_by(step) {
        if let Some(found) = code.frame_use(f).filter(|u| u.calls) {
            calling += 1;
            with += u64::from(found.sets_up_frame);
        }
    }
    (calling > 0).then(|| with as f64 / calling as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::StatedAddr;

    fn func(start: u64, size: u64) -> Function {
        Function {
            start: StatedAddr(start),
            size,
            name: "f".into(),
            aliases: vec![],
        }
    }

    /// At 0x1000: call 0x1100; jmp 0x1200; je 0x1300; jmp 0x1000 (itself); call *%rax; ret.
    fn code() -> Code<'static> {
        let mut b = vec![0xe8];
        b.extend_from_slice(&(0x1100i32 - 0x1005).to_le_bytes());
        b.push(0xe9);
        b.extend_from_slice(&(0x1200i32 - 0x100a).to_le_bytes());
        b.extend_from_slice(&[0x0f, 0x84]);
        b.extend_from_slice(&(0x1300i32 - 0x1010).to_le_bytes());
        b.extend_from_slice(&[0xeb, 0xee]); // jmp rel8 back to 0x1000
        b.extend_from_slice(&[0xff, 0xd0, 0xc3]);
        Code::Segments(vec![(0x1000, b.leak())])
    }

    #[test]
    fn decodes_each_kind_of_branch() {
        let c = code();
        assert_eq!(c.branch_at(0x1000), Some(Branch::Call));
        assert_eq!(c.branch_at(0x1005), Some(Branch::Jump));
        assert_eq!(c.branch_at(0x100a), Some(Branch::Jump));
        assert_eq!(c.branch_at(0x1012), Some(Branch::Call));
        assert_eq!(c.branch_at(0x1014), Some(Branch::Return));
        assert_eq!(c.branch_at(0x9000), None);
        assert_eq!(Code::None.branch_at(0x1000), None);
    }

    #[test]
    fn finds_the_direct_call_before_a_return_address() {
        let c = code();
        assert_eq!(c.direct_call_before(0x1005), Some(0x1100));
        assert_eq!(c.direct_call_before(0x1014), None); // after call *%rax
        assert_eq!(c.direct_call_before(3), None);
    }

    #[test]
    fn transfers_out_leave_the_function_and_keep_their_last_byte() {
        let t = code().transfers_out(&func(0x1000, 0x15));
        assert_eq!(
            t,
            [
                Transfer {
                    target: 0x1100,
                    site: 0x1004,
                    is_call: true
                },
                Transfer {
                    target: 0x1200,
                    site: 0x1009,
                    is_call: false
                },
                Transfer {
                    target: 0x1300,
                    site: 0x100f,
                    is_call: false
                },
            ]
        );
    }

    #[test]
    fn frame_use_finds_a_prologue_past_an_early_return_and_ignores_leaves() {
        // gcc 12 -O2 -fno-omit-frame-pointer: `test %edi,%edi; js out; push %rbp; mov %rsp,%rbp;
        // call g; pop %rbp; add $1,%eax; ret; out: xor %eax,%eax; ret` (shrink-wrapped).
        let shrink_wrapped = [
            0x85, 0xff, 0x78, 0x0d, 0x55, 0x48, 0x89, 0xe5, 0xe8, 0, 0, 0, 0, 0x5d, 0x83, 0xc0,
            0x01, 0xc3, 0x31, 0xc0, 0xc3,
        ];
        // Without frame pointers: `push %rbx; call g; pop %rbx; ret`.
        let no_frame = [0x53, 0xe8, 0, 0, 0, 0, 0x5b, 0xc3];
        // A leaf: `lea (%rdi,%rdi,2),%eax; ret`.
        let leaf = [0x8d, 0x04, 0x7f, 0xc3];
        let use_of = |bytes: &'static [u8]| {
            Code::Segments(vec![(0x1000, bytes)]).frame_use(&func(0x1000, bytes.len() as u64))
        };
        let found = |calls, sets_up_frame| {
            Some(FrameUse {
                calls,
                sets_up_frame,
            })
        };
        assert_eq!(
            use_of(Vec::leak(shrink_wrapped.to_vec())),
            found(true, true)
        );
        assert_eq!(use_of(Vec::leak(no_frame.to_vec())), found(true, false));
        assert_eq!(use_of(Vec::leak(leaf.to_vec())), found(false, false));
        assert_eq!(Code::None.frame_use(&func(0x1000, 4)), None);
    }
}
