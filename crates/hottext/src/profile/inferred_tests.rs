//! Inference on a hand-assembled program (x86-64 machine code at 0x1000, 0x40 bytes a function).

use super::*;
use crate::binary::StatedAddr;

const G: u32 = 0;
const C1: u32 = 1;
const C2: u32 = 2;
const TAIL: u32 = 3;
const PTR: u32 = 4;
const ONE: u32 = 5;
const WRAP: u32 = 6;

fn at(f: u32) -> u64 {
    0x1000 + 0x40 * u64::from(f)
}

/// G: nops; ret.   C1, C2: nop x4; call G; nop x4; ret.   TAIL: nop x4; jmp G; nop x4; ret.
/// PTR: nop; ret (called through pointers only).   ONE: nop; ret.   WRAP: nop x4; call ONE;
/// nop x4; ret (ONE's only caller).
fn program() -> (Vec<Function>, Code<'static>) {
    let mut bytes = vec![0x90u8; 0x40 * 7];
    let rel = |op: u8, from: u64, to: u64| {
        let mut b = vec![op];
        b.extend_from_slice(&((to as i64 - (from as i64 + 5)) as i32).to_le_bytes());
        b
    };
    let mut put = |addr: u64, b: &[u8]| {
        let o = (addr - 0x1000) as usize;
        bytes[o..o + b.len()].copy_from_slice(b);
    };
    put(at(G) + 0x10, &[0xc3]);
    for f in [C1, C2] {
        put(at(f) + 4, &rel(0xe8, at(f) + 4, at(G)));
        put(at(f) + 13, &[0xc3]);
    }
    put(at(TAIL) + 4, &rel(0xe9, at(TAIL) + 4, at(G)));
    put(at(TAIL) + 13, &[0xc3]);
    put(at(PTR) + 1, &[0xc3]);
    put(at(ONE) + 1, &[0xc3]);
    put(at(WRAP) + 4, &rel(0xe8, at(WRAP) + 4, at(ONE)));
    put(at(WRAP) + 13, &[0xc3]);
    let functions = (0..7)
        .map(|f| Function {
            start: StatedAddr(at(f)),
            size: 0x40,
            name: format!("f{f}"),
            aliases: vec![],
        })
        .collect();
    (functions, Code::Segments(vec![(0x1000, bytes.leak())]))
}

fn infer(ip_samples: &[(u64, u64)]) -> Vec<Edge> {
    let mut ip_samples = ip_samples.to_vec();
    ip_samples.sort_unstable();
    let (functions, code) = program();
    let index = FunctionIndex::new(&functions);
    let mut self_samples = vec![0u64; functions.len()];
    for &(ip, n) in &ip_samples {
        self_samples[index.at(ip).unwrap() as usize] += n;
    }
    edges(&functions, &index, &code, &self_samples, &ip_samples)
}

fn edge(caller: u32, callee: u32, site: u64, weight: u64) -> Edge {
    Edge {
        caller,
        callee,
        site,
        weight,
    }
}

#[test]
fn a_callee_is_shared_by_the_samples_around_each_call() {
    // G has 100 samples; 30 around C1's call (before and after it), 10 around C2's.
    let got = infer(&[
        (at(G) + 2, 100),
        (at(C1) + 1, 20),
        (at(C1) + 10, 10),
        (at(C2) + 2, 10),
        (at(C2) + 0x30, 50), // after C2's ret: not around the call
    ]);
    assert_eq!(
        got,
        [edge(C1, G, at(C1) + 8, 75), edge(C2, G, at(C2) + 8, 25)]
    );
}

#[test]
fn weights_are_whole_samples_that_add_up_to_the_callee_s() {
    let got = infer(&[(at(G), 10), (at(C1), 1), (at(C2), 1), (at(TAIL), 1)]);
    assert_eq!(got.iter().map(|e| e.weight).sum::<u64>(), 10);
    assert_eq!(got.len(), 3);
}

#[test]
fn a_tail_jump_counts_only_the_code_before_it() {
    // The code after TAIL's unconditional jump never runs with it: only the run before counts.
    let got = infer(&[
        (at(G), 40),
        (at(TAIL) + 1, 10),
        (at(TAIL) + 10, 90),
        (at(C1) + 1, 30),
    ]);
    assert_eq!(
        got,
        [edge(C1, G, at(C1) + 8, 30), edge(TAIL, G, at(TAIL) + 8, 10)]
    );
}

#[test]
fn without_samples_near_any_call_the_callers_own_samples_decide() {
    let got = infer(&[(at(G), 9), (at(C1) + 0x30, 2), (at(C2) + 0x30, 1)]);
    assert_eq!(
        got,
        [edge(C1, G, at(C1) + 8, 6), edge(C2, G, at(C2) + 8, 3)]
    );
}

#[test]
fn callers_without_samples_give_an_edge_only_when_there_is_one() {
    // C1, C2 and TAIL call G, and none of them was sampled: which ran is unknown.
    assert!(infer(&[(at(G), 9)]).is_empty());
    // WRAP, never sampled, is ONE's only direct caller.
    assert_eq!(infer(&[(at(ONE), 9)]), [edge(WRAP, ONE, at(WRAP) + 8, 9)]);
}

#[test]
fn a_function_called_only_through_pointers_gets_no_edge() {
    assert!(infer(&[(at(PTR), 9), (at(C1), 5)]).is_empty());
}
