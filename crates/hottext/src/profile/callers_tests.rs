//! The chain search on a small hand-assembled program (x86-64 machine code at 0x1000).

use super::*;

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;
const LEAF: u32 = 3;
const T2: u32 = 5;
const P: u32 = 6;
const Z: u32 = 10;
const S: u32 = 11;
const K: u32 = 12;
const FOO: u32 = 13;
const FOO_COLD: u32 = 14;

/// Each function is 0x40 bytes, from 0x1000 on:
///   A    push %rbp; mov %rsp,%rbp; call B; call C; pop %rbp; ret
///   B    jmp C                                  (a sibling call)
///   C    push %rbp; mov %rsp,%rbp; call LEAF; nop; pop %rbp; ret
///   LEAF mov %rdi,%rax; ret                     (no frame)
///   G    push; mov; call T2; call P; call *%rax; call R; call K; call A; pop; ret
///   T2   jmp C
///   P    push; mov; call *%rax; pop; ret
///   R    je X; jmp Y                            (two ways to Z)
///   X    jmp Z
///   Y    jmp Z
///   Z    push; mov; nop; nop; pop; ret
///   S    push; mov; call 0x1400 (no function there: a PLT stub, say); pop; ret
///   K    push; mov; call B; pop; ret
///   FOO  push; mov; je FOO_COLD; pop; ret      (gcc's hot/cold split)
///   FOO_COLD nop; nop; ud2                       (runs in FOO's frame)
/// and G also calls FOO, after A.
fn program() -> (Vec<Function>, Code<'static>) {
    const NAMES: [&str; 15] = [
        "A", "B", "C", "LEAF", "G", "T2", "P", "R", "X", "Y", "Z", "S", "K", "FOO", "FOO_COLD",
    ];
    let at = |f: u32| 0x1000 + 0x40 * u64::from(f);
    let mut bytes = vec![0xccu8; 0x40 * NAMES.len()];
    let emit = |bytes: &mut Vec<u8>, pc: &mut u64, b: &[u8]| {
        let o = (*pc - 0x1000) as usize;
        bytes[o..o + b.len()].copy_from_slice(b);
        *pc += b.len() as u64;
    };
    let rel = |opcode: &[u8], from: u64, to: u64| {
        let next = from + opcode.len() as u64 + 4;
        let mut b = opcode.to_vec();
        b.extend_from_slice(&((to as i64 - next as i64) as i32).to_le_bytes());
        b
    };
    let frame = [0x55, 0x48, 0x89, 0xe5];
    let pop_ret = [0x5d, 0xc3];
    let program: [(u32, Vec<Op>); 15] = {
        use Op::*;
        [
            (A, vec![Frame, Call(B), Call(C), PopRet]),
            (B, vec![Jmp(C)]),
            (C, vec![Frame, Call(LEAF), Raw(&[0x90]), PopRet]),
            (LEAF, vec![Raw(&[0x48, 0x89, 0xf8, 0xc3])]),
            (
                4,
                vec![
                    Frame,
                    Call(T2),
                    Call(P),
                    Raw(&[0xff, 0xd0]),
                    Call(7),
                    Call(K),
                    Call(A),
                    Call(FOO),
                    PopRet,
                ],
            ),
            (T2, vec![Jmp(C)]),
            (P, vec![Frame, Raw(&[0xff, 0xd0]), PopRet]),
            (7, vec![Je(8), Jmp(9)]),
            (8, vec![Jmp(Z)]),
            (9, vec![Jmp(Z)]),
            (Z, vec![Frame, Raw(&[0x90, 0x90]), PopRet]),
            (S, vec![Frame, CallAddr(0x1400), PopRet]),
            (K, vec![Frame, Call(B), PopRet]),
            (FOO, vec![Frame, Je(FOO_COLD), PopRet]),
            (FOO_COLD, vec![Raw(&[0x90, 0x90, 0x0f, 0x0b])]),
        ]
    };
    for (f, ops) in program {
        let mut pc = at(f);
        for op in ops {
            let b = match op {
                Op::Frame => frame.to_vec(),
                Op::PopRet => pop_ret.to_vec(),
                Op::Raw(r) => r.to_vec(),
                Op::Call(g) => rel(&[0xe8], pc, at(g)),
                Op::CallAddr(a) => rel(&[0xe8], pc, a),
                Op::Jmp(g) => rel(&[0xe9], pc, at(g)),
                Op::Je(g) => rel(&[0x0f, 0x84], pc, at(g)),
            };
            emit(&mut bytes, &mut pc, &b);
        }
    }
    let functions = NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| Function {
            start: StatedAddr(at(i as u32)),
            size: 0x40,
            name: (*name).into(),
            aliases: vec![],
        })
        .collect();
    (functions, Code::Segments(vec![(0x1000, bytes.leak())]))
}

enum Op {
    Frame,
    PopRet,
    Raw(&'static [u8]),
    Call(u32),
    CallAddr(u64),
    Jmp(u32),
    Je(u32),
}

fn call(caller: u32, callee: u32, site: Option<u64>) -> Hop {
    Hop {
        caller,
        callee,
        site,
        tail: false,
    }
}

fn caller(hop: Hop, through_tail: bool) -> Found {
    Found::Caller { hop, through_tail }
}

fn tail(caller: u32, callee: u32, site: u64) -> Hop {
    Hop {
        caller,
        callee,
        site: Some(site),
        tail: true,
    }
}

/// Return addresses: after each call in A and G, and in S.
const AFTER_B_IN_A: u64 = 0x1009;
const AFTER_C_IN_A: u64 = 0x100e;
const AFTER_T2_IN_G: u64 = 0x1109;
const AFTER_P_IN_G: u64 = 0x110e;
const AFTER_POINTER_IN_G: u64 = 0x1110;
const AFTER_R_IN_G: u64 = 0x1115;
const AFTER_K_IN_G: u64 = 0x111a;
const AFTER_A_IN_G: u64 = 0x111f;
const AFTER_STUB_IN_S: u64 = 0x12c9;
const AFTER_FOO_IN_G: u64 = 0x1124;
/// In A's, C's body (after the prologue), at LEAF's second byte, in Z's body.
const IN_A: u64 = 0x1004;
const IN_C: u64 = 0x1085;
const IN_LEAF: u64 = 0x10c1;
const IN_Z: u64 = 0x1285;

fn found(ip_in: u32, ip: u64, ret: u64) -> Found {
    let (functions, code) = program();
    let index = FunctionIndex::new(&functions);
    Callers::new(&functions, &index, code).of_stack(ip_in, ip, ret, false)
}

#[test]
fn a_direct_call_is_the_edge_perf_unwound() {
    assert_eq!(
        found(C, IN_C, AFTER_C_IN_A),
        caller(call(A, C, Some(AFTER_C_IN_A - 1)), false)
    );
}

#[test]
fn a_sibling_call_puts_the_function_that_jumped_between_caller_and_callee() {
    // A called B, B jumped to C: the stack shows A, the code shows B's jump.
    assert_eq!(
        found(C, IN_C, AFTER_B_IN_A),
        caller(tail(B, C, 0x1044), true)
    );
}

#[test]
fn a_frameless_leaf_under_a_sibling_call_finds_the_call_after_the_jump() {
    // G called T2, T2 jumped to C, C called LEAF (no frame): the stack shows G's return
    // address, whose call entered T2.
    assert_eq!(
        found(LEAF, IN_LEAF, AFTER_T2_IN_G),
        caller(call(C, LEAF, Some(0x1088)), true)
    );
}

#[test]
fn a_function_sampled_at_its_entry_after_a_call_then_a_jump() {
    // K called B, B jumped to C, sampled at C's first byte (no frame yet).
    assert_eq!(
        found(C, 0x1080, AFTER_K_IN_G),
        caller(tail(B, C, 0x1044), true)
    );
    // A calls C directly and through B: either could have led to C's entry.
    assert_eq!(
        found(C, 0x1080, AFTER_A_IN_G),
        Found::Candidates {
            hops: vec![tail(B, C, 0x1044), call(A, C, Some(0x100d))].into(),
            through_tail: true
        }
    );
}

#[test]
fn a_frameless_leaf_called_directly_keeps_the_recovered_caller() {
    assert_eq!(
        found(LEAF, IN_LEAF, AFTER_C_IN_A),
        caller(call(C, LEAF, Some(0x1088)), false)
    );
}

#[test]
fn a_cold_part_runs_in_the_frame_of_the_function_that_jumped_to_it() {
    // FOO_COLD has no prologue: the frame is FOO's, whose return address is in G.
    assert_eq!(
        found(FOO_COLD, 0x1381, AFTER_FOO_IN_G),
        caller(tail(FOO, FOO_COLD, 0x1349), true)
    );
}

#[test]
fn two_chains_of_jumps_leave_both_last_jumps_as_candidates() {
    assert_eq!(
        found(Z, IN_Z, AFTER_R_IN_G),
        Found::Candidates {
            hops: vec![tail(8, Z, 0x1204), tail(9, Z, 0x1244)].into(),
            through_tail: true
        }
    );
}

#[test]
fn no_chain_the_code_shows_leaves_the_caller_undecided() {
    // Z sampled at its entry (no frame yet) under G's call of T2: T2 jumps on to C, which
    // calls only LEAF. Something jumped to Z in a way the code does not show (through a
    // pointer): no edge, rather than one from T2.
    assert_eq!(found(Z, 0x1280, AFTER_T2_IN_G), Found::Undecided);
}

#[test]
fn pointers_and_stubs_leave_nothing_to_follow() {
    // The frameless leaf's caller was entered through a pointer.
    assert_eq!(
        found(LEAF, IN_LEAF, AFTER_POINTER_IN_G),
        Found::PointerCaller
    );
    // P (no tail jumps) called the leaf through a pointer: P is the caller, the site unknown.
    assert_eq!(
        found(LEAF, IN_LEAF, AFTER_P_IN_G),
        caller(call(P, LEAF, None), false)
    );
    // A call into a stub (no function there) is taken as unwound.
    assert_eq!(
        found(A, IN_A, AFTER_STUB_IN_S),
        caller(call(S, A, Some(AFTER_STUB_IN_S - 1)), false)
    );
    assert_eq!(found(C, IN_C, 0x2000), Found::Unresolved);
}

#[test]
fn a_pointer_into_a_function_others_jump_to_leaves_the_caller_undecided() {
    // G's call through a pointer, A sampled in its body: no function jumps to A, so the pointer
    // entered A.
    assert_eq!(
        found(A, IN_A, AFTER_POINTER_IN_G),
        caller(call(4, A, Some(AFTER_POINTER_IN_G - 1)), false)
    );
    // C is entered by B's and T2's jumps as well as by calls: the pointer may have entered B or
    // T2, which jumped on. G is not named; neither are B and T2, which the code cannot choose.
    assert_eq!(found(C, IN_C, AFTER_POINTER_IN_G), Found::Undecided);
    assert_eq!(found(C, IN_C, AFTER_STUB_IN_S), Found::Undecided);
    // With CFI the same holds: the return address is exact, the pointer's target still unknown.
    let (functions, code) = program();
    let index = FunctionIndex::new(&functions);
    let mut callers = Callers::new(&functions, &index, code);
    assert_eq!(
        callers.of_stack(C, IN_C, AFTER_POINTER_IN_G, true),
        Found::Undecided
    );
}

#[test]
fn a_stack_unwound_by_cfi_needs_no_frame_repair_but_follows_tail_jumps() {
    let (functions, code) = program();
    let index = FunctionIndex::new(&functions);
    let mut callers = Callers::new(&functions, &index, code);
    // At C's first byte CFI finds C's own return address: after K's call of B, which jumped.
    assert_eq!(
        callers.of_stack(C, 0x1080, 0x1309, true),
        caller(tail(B, C, 0x1044), true)
    );
    // At the frameless leaf, CFI finds its return address in C.
    assert_eq!(
        callers.of_stack(LEAF, IN_LEAF, 0x1089, true),
        caller(call(C, LEAF, Some(0x1088)), false)
    );
}

#[test]
fn without_code_the_stack_is_taken_as_unwound() {
    let (functions, _) = program();
    let index = FunctionIndex::new(&functions);
    let mut callers = Callers::new(&functions, &index, Code::None);
    assert_eq!(
        callers.of_stack(LEAF, IN_LEAF, AFTER_T2_IN_G, false),
        caller(call(4, LEAF, Some(AFTER_T2_IN_G - 1)), false)
    );
}
