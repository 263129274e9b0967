//! A short run of every fuzz target in `make test` (`make fuzz` runs them for hours under
//! libFuzzer): each seed of `fuzz/seeds/<target>/` must be accepted, and thousands of
//! deterministic mutations of the seeds must each be answered, accepted or refused, without a
//! panic, an abort or a hang. No coverage guidance: this catches regressions in what the seeds
//! reach, the long runs search further.

use std::path::PathBuf;

use fastrand::Rng;

/// Tokens that probe number parsing, escapes and the formats' delimiters.
const TOKENS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"18446744073709551615",
    b"99999999999999999999999",
    b"1e308",
    b"nan",
    b"%",
    b"%zz",
    b"%00",
    b" ",
    b"\n",
    b"\t",
    b"\0",
    b"\"",
    b"}",
    b"[",
    b"=",
    b"\xff",
];

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no seeds in {}", dir.display());
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seeds[below(rng, seeds.len())].clone();
    for _ in 0..1 + below(rng, 4) {
        let at = below(rng, data.len() + 1);
        match below(rng, 7) {
            0 if !data.is_empty() => {
                let i = below(rng, data.len());
                data[i] ^= 1 << below(rng, 8);
            }
            1 if !data.is_empty() => {
                let i = below(rng, data.len());
                data[i] = [0, 0xff, 0x7f, 0x80, rng.u8(..)][below(rng, 5)];
            }
            2 => {
                let token = TOKENS[below(rng, TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
            3 => {
                let end = (at + below(rng, 64)).min(data.len());
                data.drain(at..end);
            }
            4 => data.truncate(at),
            5 => {
                let end = (at + below(rng, 256)).min(data.len());
                let copy = data[at..end].to_vec();
                let to = below(rng, data.len() + 1);
                data.splice(to..to, copy);
            }
            _ => {
                // The tail of another seed after this one's head.
                let other = &seeds[below(rng, seeds.len())];
                let from = below(rng, other.len() + 1);
                data.truncate(at);
                data.extend_from_slice(&other[from..]);
            }
        }
    }
    data
}

fn smoke(target: &str, run: fn(&[u8]) -> bool, rounds: usize) {
    let seeds = seeds(target);
    for (i, seed) in seeds.iter().enumerate() {
        assert!(run(seed), "{target}: seed {i} is refused");
    }
    let mut rng = Rng::with_seed(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    let mut refused = 0;
    for _ in 0..rounds {
        if !run(&mutate(&mut rng, &seeds)) {
            refused += 1;
        }
    }
    // Refusals show that mutations reach the parser's checks, acceptances that they do not
    // all break the input.
    assert!(
        refused > 0 && refused < rounds,
        "{target}: {refused} of {rounds} mutations refused"
    );
}

#[test]
fn profile_reader_survives_mutated_profiles() {
    smoke("profile", hottext::fuzz::profile, 20_000);
}

#[test]
fn meta_reader_survives_mutated_meta_files() {
    smoke("meta", hottext::fuzz::meta, 20_000);
}

#[test]
fn config_reader_survives_mutated_configs() {
    smoke("config", hottext::fuzz::config, 20_000);
}

#[test]
fn block_map_reader_survives_mutated_sections() {
    smoke("bb_addr_map", hottext::fuzz::bb_addr_map, 20_000);
}

#[test]
fn perf_data_reader_survives_mutated_recordings() {
    smoke("perf_data", hottext::fuzz::perf_data, 5_000);
}

/// A number below `n` (0 when `n` is 0), from a seeded generator: a failure reproduces.
fn below(rng: &mut Rng, n: usize) -> usize {
    rng.usize(..n.max(1))
}
