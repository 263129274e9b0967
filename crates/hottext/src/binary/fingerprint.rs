//! Code fingerprints: a function's size and a hash of its instructions, to find it again in a
//! later build under another name (`graph::fit`), as BOLT matches stale profiles.
//!
//! On x86-64 the hash covers each instruction's opcode form and registers but not its
//! displacements, immediates or branch targets, since relinking moves callees and data and so
//! changes those bytes even when the code did not change; elsewhere it is the raw bytes.

use foldhash::HashMap;

use object::{Object, ObjectSection};
use sha2::{Digest, Sha256};

use super::Binary;

/// Size and code hash of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// The function's size in bytes: two functions of different size never match.
    pub size: u64,
    /// A 64-bit hash of its instructions (see the module's rules for what it covers).
    pub hash: u64,
}

impl Fingerprint {
    /// A fingerprint written as hex (a profile's `fn-hash` header), with the function's size.
    pub(crate) fn parse_hex(hex: &str, size: u64) -> Option<Fingerprint> {
        Some(Fingerprint {
            size,
            hash: u64::from_str_radix(hex, 16).ok()?,
        })
    }
}

/// Fingerprints by canonical function name.
pub type Fingerprints = HashMap<String, Fingerprint>;

/// Fingerprints of a binary's functions by canonical name.
pub fn fingerprints(binary: &Binary) -> std::io::Result<Fingerprints> {
    let file = object::File::parse(binary.bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let x86_64 = file.architecture() == object::Architecture::X86_64;
    let sections: Vec<_> = file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text)
        .collect();
    let mut out = Fingerprints::default();
    out.reserve(binary.functions.len());
    for f in &binary.functions {
        let bytes = sections
            .iter()
            .find_map(|s| s.data_range(f.start.0, f.size).ok().flatten());
        if let Some(bytes) = bytes {
            let hash = if x86_64 {
                x86_64_hash(bytes, f.start.0)
            } else {
                bytes_hash(bytes)
            };
            out.insert(f.name.clone(), Fingerprint { size: f.size, hash });
        }
    }
    Ok(out)
}

/// Hash of the instruction forms and registers, without the operands that relinking changes.
fn x86_64_hash(bytes: &[u8], at: u64) -> u64 {
    use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind};
    let mut hasher = Sha256::new();
    let mut decoder = Decoder::with_ip(64, bytes, at, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        hasher.update((insn.code() as u16).to_le_bytes());
        for op in 0..insn.op_count() {
            match insn.op_kind(op) {
                OpKind::Register => hasher.update([insn.op_register(op) as u8]),
                OpKind::Memory => hasher.update([
                    insn.memory_base() as u8,
                    insn.memory_index() as u8,
                    insn.memory_index_scale() as u8,
                ]),
                // Immediates, displacements and branch targets may be addresses.
                _ => {}
            }
        }
    }
    first_u64(&hasher.finalize())
}

fn bytes_hash(bytes: &[u8]) -> u64 {
    first_u64(&Sha256::digest(bytes))
}

fn first_u64(digest: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_call_targets_do_not_change_the_hash() {
        // push rbp; call rel32; lea rax,[rip+disp32]; pop rbp; ret — relinked elsewhere, with
        // the callee and the data moved.
        let code = |call: i32, data: i32| {
            let mut v = vec![0x55, 0xe8];
            v.extend_from_slice(&call.to_le_bytes());
            v.extend_from_slice(&[0x48, 0x8d, 0x05]);
            v.extend_from_slice(&data.to_le_bytes());
            v.extend_from_slice(&[0x5d, 0xc3]);
            v
        };
        let a = x86_64_hash(&code(0x100, 0x2000), 0x401000);
        assert_eq!(a, x86_64_hash(&code(-0x7000, 0x9123), 0x402340));
        // Another register is other code.
        let mut other = code(0x100, 0x2000);
        other[8] = 0x0d; // lea rcx
        assert_ne!(a, x86_64_hash(&other, 0x401000));
    }
}
