use std::path::Path;
use std::process::Command;

use super::*;
use crate::binary::{block_entries, BlockMap, StatedAddr};

const ELF64: AddressForm = AddressForm {
    size: 8,
    little_endian: true,
};

/// A ULEB128 encoding of `n`.
fn uleb(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// An entry as clang 17 and 18 write it: version 2, no features, one range of blocks given as
/// (id, gap after the previous block, size, metadata).
fn clang17_entry(address: u64, blocks: &[(u32, u32, u32, u32)]) -> Vec<u8> {
    let mut out = vec![2, 0];
    out.extend(address.to_le_bytes());
    out.extend(uleb(blocks.len() as u64));
    for &(id, gap, size, md) in blocks {
        for n in [id, gap, size, md] {
            out.extend(uleb(u64::from(n)));
        }
    }
    out
}

fn block(id: u32, offset: u32, size: u32, flags: u8) -> BlockEntry {
    BlockEntry {
        id,
        offset,
        size,
        flags,
    }
}

#[test]
fn version_2_as_clang_17_and_18_write_it_counts_offsets_from_the_previous_block() {
    let mut bytes = clang17_entry(0x1000, &[(0, 0, 12, 8), (3, 0, 5, 0), (1, 4, 20, 1)]);
    bytes.extend(clang17_entry(0x2000, &[(0, 0, 7, 1)]));
    let functions = parse(&bytes, false, ELF64).unwrap();
    assert_eq!(functions.len(), 2);
    assert_eq!(functions[0].version, 2);
    assert_eq!(functions[0].features, Features::default());
    assert_eq!(
        functions[0].ranges,
        [BlockRange {
            address: 0x1000,
            blocks: vec![block(0, 0, 12, 8), block(3, 12, 5, 0), block(1, 21, 20, 1)],
        }]
    );
    assert_eq!(functions[1].ranges[0].blocks, [block(0, 0, 7, 1)]);
}

#[test]
fn version_1_numbers_blocks_by_index_and_v0_offsets_are_from_the_range() {
    let v1 = [1, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 2, 0, 4, 0, 2, 6, 0];
    let f = &parse(&v1, false, ELF64).unwrap()[0];
    assert_eq!(f.ranges[0].blocks, [block(0, 0, 4, 0), block(1, 6, 6, 0)]);
    let v0 = [0x10, 0, 0, 0, 0, 0, 0, 0, 2, 0, 4, 0, 6, 6, 0];
    let f = &parse(&v0, true, ELF64).unwrap()[0];
    assert_eq!((f.version, f.ranges[0].address), (0, 0x10));
    assert_eq!(f.ranges[0].blocks, [block(0, 0, 4, 0), block(1, 6, 6, 0)]);
}

#[test]
fn every_feature_is_read_in_clang_19s_order() {
    // Entry count, frequencies, probabilities and two ranges; 32-bit big-endian addresses.
    let mut bytes = vec![2, 0b1111, 2];
    bytes.extend([0, 0, 0x10, 0]);
    bytes.extend([1, 0, 0, 4, 8]);
    bytes.extend([0, 0, 0x20, 0]);
    bytes.extend([1, 1, 2, 3, 1]);
    bytes.extend(uleb(1000)); // entry count
    bytes.extend([7, 1, 1]); // block 0: frequency 7, one successor…
    bytes.extend(uleb(1 << 31)); // …taken always
    bytes.extend([5, 0]); // block 1: frequency 5, no successor
    let form = AddressForm {
        size: 4,
        little_endian: false,
    };
    let f = &parse(&bytes, false, form).unwrap()[0];
    assert!(f.features.multiple_ranges && f.features.branch_probabilities);
    assert_eq!(f.ranges.len(), 2);
    assert_eq!((f.ranges[0].address, f.ranges[1].address), (0x1000, 0x2000));
    assert_eq!(f.ranges[1].blocks, [block(1, 2, 3, 1)]);
    assert_eq!(f.entry_count, Some(1000));
    assert_eq!(
        f.block_profiles,
        [
            BlockProfile {
                frequency: Some(7),
                successors: vec![(1, 1 << 31)]
            },
            BlockProfile {
                frequency: Some(5),
                successors: vec![]
            }
        ]
    );
}

#[test]
fn cut_short_and_hostile_bytes_are_errors_that_name_the_byte() {
    let whole = clang17_entry(0x1000, &[(0, 0, 12, 8), (3, 0, 5, 0)]);
    for cut in 1..whole.len() {
        let err = parse(&whole[..cut], false, ELF64).unwrap_err();
        assert!(err.offset <= cut, "cut at {cut}: {err}");
        assert!(err.to_string().contains("ends inside"), "{err}");
    }
    let refused = |bytes: &[u8], says: &str, at: usize| {
        let err = parse(bytes, false, ELF64).unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
        assert_eq!(err.offset, at, "{err}");
    };
    refused(&[3, 0], "version 3", 0);
    refused(&[0, 0], "version 0", 0);
    refused(&[2, 0x40], "feature bits 0x40", 1);
    refused(&[1, 1], "need version 2", 1);
    refused(&[2, 8, 0], "zero ranges", 2);
    let mut huge_count = vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    huge_count.extend(uleb(u64::from(u32::MAX)));
    refused(&huge_count, "ends inside a block id", huge_count.len());
    let mut over_32_bits = vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    over_32_bits.extend(uleb(1 << 33));
    refused(&over_32_bits, "does not fit in 32 bits", 10);
    let mut over_64_bits = vec![2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    over_64_bits.extend([0xff; 10]);
    over_64_bits.push(1);
    refused(&over_64_bits, "does not fit in 64 bits", 11);
    let mut past_4_gib = vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0];
    past_4_gib.extend(uleb(u64::from(u32::MAX)));
    past_4_gib.extend([1, 0, 1, 0, 1, 0]);
    refused(&past_4_gib, "past 4 GiB", 12);
    refused(
        &[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0x20],
        "metadata 0x20",
        14,
    );
}

#[test]
fn overlapping_blocks_keep_the_first_and_addresses_find_their_block() {
    let mut bytes = clang17_entry(0x1000, &[(0, 0, 16, 0), (1, 0, 16, 0), (2, 0, 0, 0)]);
    bytes.extend(clang17_entry(0x1008, &[(5, 0, 4, 0)]));
    let map = BlockMap::new(&parse(&bytes, false, ELF64).unwrap());
    let id_at = |a| map.block_at(StatedAddr(a)).map(|b| b.id);
    assert_eq!(id_at(0x0fff), None);
    assert_eq!(id_at(0x1000), Some(0));
    assert_eq!(id_at(0x1008), Some(0), "the overlapping block is left out");
    assert_eq!(id_at(0x101f), Some(1));
    assert_eq!(id_at(0x1020), None, "an empty block holds no address");
    assert_eq!(
        map.blocks_in(StatedAddr(0x1001), StatedAddr(0x1020)).len(),
        1
    );
}

/// The functions, ranges and blocks as `llvm-readobj --bb-addr-map` prints them, one line per
/// range and block: `range <address>` and `<id> <offset> <size> <flags>`.
fn readobj_listing(binary: &Path) -> String {
    let out = Command::new("llvm-readobj-19")
        .arg("--bb-addr-map")
        .arg(binary)
        .output()
        .expect("this test needs llvm-readobj-19: apt-get install llvm-19 (scripts/setup.sh test)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut listing = String::new();
    let mut fields: Vec<u64> = Vec::new();
    let hex = |v: &str| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let Some((key, value)) = line.trim().split_once(": ") else {
            continue;
        };
        match key {
            "Base Address" => listing += &format!("range {:#x}\n", hex(value)),
            "ID" => fields = vec![value.parse().unwrap()],
            "Offset" | "Size" => fields.push(hex(value)),
            "HasReturn" | "HasTailCall" | "IsEHPad" | "CanFallThrough" => {
                fields.push(u64::from(value == "Yes"))
            }
            "HasIndirectBranch" => {
                let bits = &fields[3..];
                let flags = bits
                    .iter()
                    .rev()
                    .fold(u64::from(value == "Yes"), |f, b| f << 1 | b);
                listing += &format!("{} {:#x} {:#x} {flags}\n", fields[0], fields[1], fields[2]);
            }
            _ => {}
        }
    }
    listing
}

fn our_listing(binary: &Path) -> String {
    let entries = block_entries(&std::fs::read(binary).unwrap())
        .unwrap()
        .expect("the binary has a block map");
    let mut listing = String::new();
    for range in entries.iter().flat_map(|f| &f.ranges) {
        listing += &format!("range {:#x}\n", range.address);
        for b in &range.blocks {
            listing += &format!("{} {:#x} {:#x} {}\n", b.id, b.offset, b.size, b.flags);
        }
    }
    listing
}

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static long work(long n, int cold) {
  long s = 0;
  if (cold) {
    for (long i = 0; i < n; i++) s += (i * 7) % 13;
    printf("cold %ld\n", s);
    return s;
  }
  for (long i = 0; i < n; i++) s += (i ^ (s >> 3)) % 1000003;
  return s;
}
int main(int argc, char **argv) {
  printf("%ld\n", work(argc > 1 ? atol(argv[1]) : 1000, argc > 2));
  return 0;
}
"#;

/// Builds a small program (`work` has a hot loop and a cold branch) with clang 19, its block
/// map and `flags` in `dir` as `name`.
pub(crate) fn clang(dir: &Path, name: &str, flags: &[&str]) -> std::path::PathBuf {
    clang_source(dir, name, PROGRAM, flags)
}

/// Builds the C program `source` with clang 19 as [`clang`] does.
pub(crate) fn clang_source(
    dir: &Path,
    name: &str,
    source: &str,
    flags: &[&str],
) -> std::path::PathBuf {
    std::fs::write(dir.join("p.c"), source).unwrap();
    let out = dir.join(name);
    let built = Command::new("clang-19")
        .args(["-O2", "-ffunction-sections", "-fbasic-block-address-map", "-fuse-ld=lld"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(dir.join("p.c"))
        .output()
        .expect("this test needs clang-19 and lld-19: apt-get install clang-19 lld-19 (scripts/setup.sh test)");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

#[test]
fn clang_19s_block_maps_read_as_llvm_readobj_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let plain = clang(dir.path(), "plain", &[]);
    let listing = our_listing(&plain);
    assert_eq!(listing, readobj_listing(&plain));
    assert!(listing.matches("range").count() >= 2, "{listing}");

    let clusters = dir.path().join("clusters");
    std::fs::write(&clusters, "v1\nf work\nc 0 1\n").unwrap();
    let list = format!("-fbasic-block-sections=list={}", clusters.display());
    let split = clang(dir.path(), "split", &[&list]);
    let listing = our_listing(&split);
    assert_eq!(listing, readobj_listing(&split));
    let entries = block_entries(&std::fs::read(&split).unwrap())
        .unwrap()
        .unwrap();
    assert!(
        entries
            .iter()
            .any(|f| f.ranges.len() == 2 && f.features.multiple_ranges),
        "the split function lies in two ranges:\n{listing}"
    );
    // The split-off part is a function of its own (clang gives its symbol no type), and its
    // blocks lie in it.
    let binary = crate::binary::Binary::open(&split).unwrap();
    let cold = &binary.functions[binary.index_by_name()["work.cold"]];
    let map = binary.block_map().unwrap().unwrap();
    assert!(!map.blocks_in(cold.start, cold.end()).is_empty());
    assert!(map
        .blocks_in(cold.start, cold.end())
        .iter()
        .all(|b| b.end() <= cold.end()));

    let object = dir.path().join("p.o");
    let built = Command::new("clang-19")
        .args(["-O2", "-c", "-fbasic-block-address-map", "-o"])
        .arg(&object)
        .arg(dir.path().join("p.c"))
        .status()
        .unwrap();
    assert!(built.success());
    let err = block_entries(&std::fs::read(&object).unwrap()).unwrap_err();
    assert!(err.to_string().contains("relocatable"), "{err}");
}
