//! The fuzz targets' bodies (`fuzz/`, `make fuzz`), here so that `cargo-fuzz`'s targets and the
//! smoke test in `make test` (`tests/fuzz_smoke.rs`) run the same code. Each takes any bytes,
//! must neither panic nor abort nor hang, checks what must hold of what it accepted, and says
//! whether the parser accepted the input.

use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;

use crate::binary::Binary;
use crate::graph::Graph;
use crate::layout::{self, Params, ALGORITHMS};
use crate::link::{self, Ordering, Origin, Request, UnsafeNames, FORMATS};
use crate::pipeline::config::Config;
use crate::profile::ProfileError;
use crate::store::meta::Meta;

/// Layouts run on accepted profiles up to this many functions, so that one input stays fast.
const LAYOUT_LIMIT: usize = 2_000;

/// The profile reader: what it accepts is written back, read again and written identically;
/// small graphs are ordered by every algorithm (each order names each function at most once)
/// and written in every format, and `auto` scores the orders with the layout model.
pub fn profile(data: &[u8]) -> bool {
    let Ok(graph) = Graph::read(data) else {
        return false;
    };
    let written = write(&graph);
    let again = Graph::read(&written[..])
        .unwrap_or_else(|e| panic!("a profile written by hottext is refused: {e}"));
    assert!(written == write(&again), "writing is not stable");
    if graph.funcs().len() <= LAYOUT_LIMIT {
        for algorithm in ALGORITHMS {
            let order = layout::order(&graph, algorithm, &Params::default());
            let mut seen = vec![false; graph.funcs().len()];
            for &f in &order {
                assert!(!std::mem::replace(&mut seen[f.index()], true), "{f} twice");
            }
            for &format in FORMATS {
                let request = Request {
                    format,
                    ordering: Ordering::With(algorithm),
                    params: &Params::default(),
                    placement: None,
                    hot_offset: 0,
                    padding: link::Padding::Auto,
                    unsafe_names: UnsafeNames::Refuse,
                    binary: None,
                    at: None,
                    origin: Origin::Profile("fuzz"),
                    max_pages: 8,
                    split: crate::link::SplitRule::default(),
                    progress: &|_| {},
                };
                // Refused names and `ranges` without a binary are errors, not panics.
                let _ = link::write(&graph, &request);
            }
        }
        let choice = layout::auto::choose(&graph, &Params::default(), &|_| {});
        for candidate in &choice.candidates {
            let score = candidate.score;
            assert!(
                (0.0..=1.0).contains(&score),
                "{}: score {score}",
                candidate.algorithm
            );
        }
    }
    true
}

/// The meta file: what it accepts is written back and read again to the same text.
pub fn meta(data: &[u8]) -> bool {
    let path = Path::new("fuzz.meta");
    let Some(meta) = std::str::from_utf8(data)
        .ok()
        .and_then(|t| Meta::parse(t, path).ok())
    else {
        return false;
    };
    let text = meta.to_text("hottext store put");
    let again = Meta::parse(&text, path)
        .unwrap_or_else(|e| panic!("a meta file written by hottext is refused: {e}\n{text}"));
    assert_eq!(
        text,
        again.to_text("hottext store put"),
        "writing is not stable"
    );
    true
}

/// The pipeline's config.
pub fn config(data: &[u8]) -> bool {
    std::str::from_utf8(data)
        .ok()
        .and_then(|t| Config::parse(t, Path::new("fuzz/hottext.toml")).ok())
        .is_some()
}

/// The perf.data reader, through `profile` as the CLI runs it, against this program's own
/// binary: the input is written to an in-memory file first (the reader takes a path). Accepted
/// means read to the end: a recording of another program is accepted and then found to have
/// no samples of this one.
pub fn perf_data(data: &[u8]) -> bool {
    static SELF: OnceLock<Binary> = OnceLock::new();
    let binary = SELF.get_or_init(|| {
        let exe = std::env::current_exe().expect("the fuzz target's own path");
        Binary::open(&exe).expect("the fuzz target's own binary")
    });
    let file = memfd();
    (&file).write_all(data).expect("writing an in-memory file");
    let read = crate::profile::read(
        &crate::os::proc::fd_path(&file),
        binary,
        &crate::profile::Options::default(),
        &mut |_, _| {},
    );
    !matches!(
        read,
        Err(ProfileError::Io { .. }
            | ProfileError::NotPerfData { .. }
            | ProfileError::Truncated { .. }
            | ProfileError::Unfinished { .. }
            | ProfileError::Malformed { .. }
            | ProfileError::Damaged { .. })
    )
}

fn write(graph: &Graph) -> Vec<u8> {
    let mut out = Vec::new();
    graph.write(&mut out).expect("writing to memory");
    out
}

fn memfd() -> std::fs::File {
    // SAFETY: a NUL-terminated name and no flags; the descriptor is owned by the File.
    let fd = unsafe { libc::memfd_create(c"hottext-fuzz".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
}

/// The `.llvm_bb_addr_map` reader: the first byte chooses the section type (bit 0: the old
/// V0 type) and the address form (bit 1: 32-bit, bit 2: big-endian), the rest is the section.
/// Of what it accepts, every block of the map built from it is found at its first byte.
pub fn bb_addr_map(data: &[u8]) -> bool {
    use crate::binary::bb_addr_map::{parse, AddressForm};
    use crate::binary::BlockMap;
    let Some((&choice, section)) = data.split_first() else {
        return false;
    };
    let form = AddressForm {
        size: if choice & 2 != 0 { 4 } else { 8 },
        little_endian: choice & 4 == 0,
    };
    let Ok(functions) = parse(section, choice & 1 != 0, form) else {
        return false;
    };
    let map = BlockMap::new(&functions);
    let starts = functions.iter().flat_map(|f| &f.ranges).flat_map(|r| {
        r.blocks
            .iter()
            .map(move |b| r.address.saturating_add(u64::from(b.offset)))
    });
    for start in starts {
        if let Some(block) = map.block_at(crate::binary::StatedAddr(start)) {
            assert!(block.start.0 <= start && start < block.end().0);
        }
    }
    true
}
