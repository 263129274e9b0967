//! Decoding hand-made sample bodies.

use linux_perf_data::linux_perf_event_reader::constants::{
    PERF_CONTEXT_KERNEL, PERF_RECORD_MISC_KERNEL,
};

use super::*;

fn layout(format: SampleFormat, hw_index: bool) -> SampleLayout {
    SampleLayout {
        format,
        branch_hw_index: hw_index,
        branches: BranchFilter::new(
            BranchSampleFormat::ANY | BranchSampleFormat::TYPE_SAVE,
            false,
        ),
        regs_user_mask: 0,
        reg_numbers: RegNumbers::of(object::Architecture::X86_64),
        big_endian: false,
    }
}

fn bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

const USER: u16 = PERF_RECORD_MISC_USER;

#[test]
fn reads_pid_and_callchain_of_a_perf_record_g_sample() {
    // perf record -g: IP|TID|TIME|CALLCHAIN|PERIOD
    let f = SampleFormat::IP
        | SampleFormat::TID
        | SampleFormat::TIME
        | SampleFormat::CALLCHAIN
        | SampleFormat::PERIOD;
    let pid_tid = 42u64 | (43 << 32);
    let body = bytes(&[
        0x1010,
        pid_tid,
        777,
        5000,
        3,
        PERF_CONTEXT_USER,
        0x1010,
        0x2020,
    ]);
    let s = layout(f, false).decode(USER, &body).unwrap();
    assert_eq!((s.pid, s.ip, s.time), (Some(42), Some(0x1010), Some(777)));
    assert_eq!(
        s.callchain.unwrap().iter().collect::<Vec<_>>(),
        [PERF_CONTEXT_USER, 0x1010, 0x2020]
    );
    assert_eq!(s.top_user_frames(), [Some(0x1010), Some(0x2020)]);
}

#[test]
fn kernel_frames_are_skipped_to_the_user_part() {
    let f = SampleFormat::IP | SampleFormat::CALLCHAIN;
    let body = bytes(&[
        0xffff_ffff_8100_0000,
        5,
        PERF_CONTEXT_KERNEL,
        0xffff_ffff_8100_0000,
        PERF_CONTEXT_USER,
        0x4000,
        0x5000,
    ]);
    let s = layout(f, false)
        .decode(PERF_RECORD_MISC_KERNEL, &body)
        .unwrap();
    assert!(!s.user_mode);
    assert_eq!(s.top_user_frames(), [Some(0x4000), Some(0x5000)]);
}

#[test]
fn kernel_only_sample_has_no_user_frames() {
    let f = SampleFormat::IP | SampleFormat::CALLCHAIN;
    let body = bytes(&[
        0xffff_ffff_8100_0000,
        2,
        PERF_CONTEXT_KERNEL,
        0xffff_ffff_8100_0000,
    ]);
    let s = layout(f, false)
        .decode(PERF_RECORD_MISC_KERNEL, &body)
        .unwrap();
    assert_eq!(s.top_user_frames(), [None, None]);
}

#[test]
fn sample_without_callchain_uses_its_ip() {
    let body = bytes(&[0x4000]);
    let s = layout(SampleFormat::IP, false).decode(USER, &body).unwrap();
    assert_eq!(s.top_user_frames(), [Some(0x4000), None]);
}

#[test]
fn decodes_branch_stack_after_raw_data_with_hw_index() {
    // perf record -j any_call with a raw payload in front, as the kernel lays it out.
    let f = SampleFormat::IP | SampleFormat::RAW | SampleFormat::BRANCH_STACK;
    let mut body = bytes(&[0x4000]);
    body.extend_from_slice(&4u32.to_le_bytes());
    body.extend_from_slice(&[0xaa; 4]);
    body.extend(bytes(&[
        2, 99, /* hw_idx */
        0x1100, 0x2000, 0, 0x2100, 0x3000, 0,
    ]));
    let s = layout(f, true).decode(USER, &body).unwrap();
    assert_eq!(
        s.branches.unwrap().iter().collect::<Vec<_>>(),
        [(0x1100, 0x2000, 0), (0x2100, 0x3000, 0)]
    );
}

#[test]
fn branch_stack_without_hw_index() {
    let f = SampleFormat::TID | SampleFormat::BRANCH_STACK;
    let body = bytes(&[7, 1, 0x1100, 0x2000, 0x3]);
    let s = layout(f, false).decode(USER, &body).unwrap();
    assert_eq!(s.pid, Some(7));
    assert_eq!(
        s.branches.unwrap().iter().collect::<Vec<_>>(),
        [(0x1100, 0x2000, 0x3)]
    );
}

#[test]
fn big_endian_records_are_read_in_their_byte_order() {
    let mut l = layout(SampleFormat::IP | SampleFormat::CALLCHAIN, false);
    l.big_endian = true;
    let body: Vec<u8> = [0x4000u64, 1, 0x4000]
        .iter()
        .flat_map(|w| w.to_be_bytes())
        .collect();
    let s = l.decode(USER, &body).unwrap();
    assert_eq!(s.top_user_frames(), [Some(0x4000), None]);
}

#[test]
fn short_or_lying_records_are_unreadable_not_a_panic() {
    let f = SampleFormat::IP | SampleFormat::CALLCHAIN;
    let l = layout(f, false);
    assert_eq!(l.decode(USER, &[1, 2, 3]).unwrap_err(), Unreadable);
    assert_eq!(
        l.decode(USER, &bytes(&[0x4000, 3, 1])).unwrap_err(),
        Unreadable
    );
    assert_eq!(
        l.decode(USER, &bytes(&[0x4000, u64::MAX])).unwrap_err(),
        Unreadable
    );
    let b = layout(SampleFormat::BRANCH_STACK, false);
    assert_eq!(
        b.decode(USER, &bytes(&[u64::MAX / 8])).unwrap_err(),
        Unreadable
    );
}

/// perf's `--call-graph dwarf` mask on x86-64: ax..r15 without the segment registers (12-15).
const X86_64_USER_REGS: u64 = 0xff_0fff;

/// A `--call-graph dwarf` layout: IP|TID|CALLCHAIN|REGS_USER|STACK_USER.
fn dwarf_layout() -> SampleLayout {
    let f = SampleFormat::IP
        | SampleFormat::TID
        | SampleFormat::CALLCHAIN
        | SampleFormat::REGS_USER
        | SampleFormat::STACK_USER;
    SampleLayout {
        regs_user_mask: X86_64_USER_REGS,
        ..layout(f, false)
    }
}

/// Register values 0x100 + perf's number of the register, in the mask's bit order.
fn x86_64_regs() -> Vec<u64> {
    (0..64u64)
        .filter(|n| X86_64_USER_REGS & (1 << n) != 0)
        .map(|n| 0x100 + n)
        .collect()
}

#[test]
fn user_registers_and_stack_of_a_dwarf_sample() {
    let mut words = vec![0x4010, 7, 1, PERF_CONTEXT_USER, 2]; // ip, pid, chain, abi 64
    words.extend(x86_64_regs());
    words.extend([24, 0xa, 0xb, 0xc, 16]); // 24 bytes of stack, 16 of them filled
    let body = bytes(&words);
    let s = dwarf_layout().decode(USER, &body).unwrap();
    let regs = s.regs_user.unwrap();
    // Registers after the segment registers' gap are found by their bit, not their number.
    assert_eq!(
        (regs.get(7), regs.get(8), regs.get(16)),
        (Some(0x107), Some(0x108), Some(0x110))
    );
    assert_eq!((regs.get(12), regs.get(64)), (None, None));
    assert_eq!(s.stack_user.unwrap(), &bytes(&[0xa, 0xb])[..]);
    // The user part of the chain is empty: the innermost frame is the sampled ip register.
    assert_eq!(s.top_user_frames(), [Some(0x108), None]);
}

#[test]
fn dwarf_sample_of_a_kernel_thread_has_no_user_frames() {
    // abi 0: no registers follow; stack size 0: no bytes and no dyn_size.
    let words = [
        0xffff_ffff_8100_0000,
        7,
        2,
        PERF_CONTEXT_KERNEL,
        0xffff_ffff_8100_0000,
        0,
        0,
    ];
    let body = bytes(&words);
    let s = dwarf_layout()
        .decode(PERF_RECORD_MISC_KERNEL, &body)
        .unwrap();
    assert!(s.regs_user.is_none() && s.stack_user.is_none());
    assert_eq!(s.top_user_frames(), [None, None]);
}

#[test]
fn lying_user_stack_sizes_are_unreadable_or_clamped() {
    let head = |stack: &[u64]| {
        let mut w = vec![0x4010, 7, 0, 2];
        w.extend(x86_64_regs());
        w.extend_from_slice(stack);
        bytes(&w)
    };
    let l = dwarf_layout();
    assert_eq!(l.decode(USER, &head(&[u64::MAX])).unwrap_err(), Unreadable);
    assert_eq!(
        l.decode(USER, &head(&[16, 0xa])).unwrap_err(),
        Unreadable,
        "short copy"
    );
    assert_eq!(
        l.decode(USER, &head(&[8, 0xa])).unwrap_err(),
        Unreadable,
        "no dyn_size"
    );
    let body = head(&[8, 0xa, u64::MAX]);
    let s = l.decode(USER, &body).unwrap();
    assert_eq!(s.stack_user.unwrap().len(), 8, "dyn_size beyond the copy");
    // Fewer register values than the mask has bits.
    let short = bytes(&[0x4010, 7, 0, 2, 1, 2, 3]);
    assert_eq!(l.decode(USER, &short).unwrap_err(), Unreadable);
}

#[test]
fn dwarf_sample_taken_in_a_system_call_starts_at_the_user_registers() {
    // Sampled in the kernel on behalf of a process: the ip is the kernel's, the user
    // registers hold where the process entered it.
    let mut words = vec![
        0xffff_ffff_8100_0000,
        7,
        2,
        PERF_CONTEXT_KERNEL,
        0xffff_ffff_8100_0000,
        2,
    ];
    words.extend(x86_64_regs());
    words.extend([8, 0xa, 8]);
    let body = bytes(&words);
    let s = dwarf_layout()
        .decode(PERF_RECORD_MISC_KERNEL, &body)
        .unwrap();
    assert_eq!(s.top_user_frames(), [Some(0x108), None]);
    // Without a call chain in the format, the same.
    let f =
        SampleFormat::IP | SampleFormat::TID | SampleFormat::REGS_USER | SampleFormat::STACK_USER;
    let l = SampleLayout {
        regs_user_mask: X86_64_USER_REGS,
        ..layout(f, false)
    };
    let body = bytes(
        &[
            &[0xffff_ffff_8100_0000, 7, 2][..],
            &x86_64_regs(),
            &[8, 0xa, 8],
        ]
        .concat(),
    );
    let s = l.decode(PERF_RECORD_MISC_KERNEL, &body).unwrap();
    assert_eq!(s.top_user_frames(), [Some(0x108), None]);
}
