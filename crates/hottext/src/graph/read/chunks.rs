//! The call section, read in chunks on two threads while this one reads the file ahead.
//!
//! Why: in a profile of a large service most lines are calls, and each costs two name
//! look-ups that miss the cache; they only read the declared functions, so chunks of call
//! lines can be looked up side by side (`hottext order --algorithm c3` on the 1 M-function
//! benchmark profile: 4.1-4.4 s → 3.0-3.2 s, bench/RESULTS.md). The result is the same as
//! reading line by line, errors and their line numbers included: chunks are taken back in file order, a chunk starts at a `call` line (so
//! no call's sites are split), and a chunk with any other kind of record (a `fn` line among the
//! calls, a `site` line in a v1 file, an unknown record, invalid UTF-8) is handed back, with
//! every chunk after it, to be read line by line.

use std::collections::VecDeque;
use std::io::{self, BufRead};
use std::sync::mpsc;

use super::calls::{CallLines, CalleePrefetch, Names, SLOT_AHEAD};
use super::{kind, record, text, Reader, Record};
use crate::graph::GraphError;

/// About 4 MiB a chunk: large enough that handing one over costs nothing, small enough that
/// the chunks in flight stay a few tens of MiB.
pub(super) const CHUNK_BYTES: usize = 1 << 22;
const WORKERS: usize = 2;
/// Chunks handed to a worker and not yet taken back.
const IN_FLIGHT_PER_WORKER: usize = 2;

/// Whole lines of the file, the first of them line `first_line`.
pub(super) struct Chunk {
    bytes: Vec<u8>,
    pub first_line: usize,
}

impl Chunk {
    /// Each line with its line break, if it has one.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.bytes.split_inclusive(|&b| b == b'\n')
    }
}

/// What the chunked reading leaves to be read line by line.
pub(super) struct Left {
    /// Chunks handed back, in file order.
    pub chunks: Vec<Chunk>,
    /// The number the next line of the input has.
    pub next_line: usize,
}

/// How a worker's reading of a chunk ended.
enum End {
    Read,
    Malformed {
        line: usize,
        msg: String,
    },
    /// A line only the line-by-line reader handles.
    HandBack,
}

struct Parsed {
    lines: CallLines,
    headers: Vec<(String, String)>,
    end: End,
}

/// Reads the rest of `input`, whose line `lineno` is `first` (a `call` line), into `reader`.
pub(super) fn read(
    reader: &mut Reader,
    input: &mut impl BufRead,
    first: Vec<u8>,
    lineno: usize,
    chunk_bytes: usize,
) -> Result<Left, GraphError> {
    let names = Names {
        funcs: &reader.graph.funcs,
        ids: &reader.ids,
    };
    let version = reader.version;
    let (calls, headers) = (&mut reader.calls, &mut reader.graph.headers);
    let mut source = Source {
        carry: first,
        next_line: lineno,
        eof: false,
        chunk_bytes,
    };
    let mut left = Vec::new();
    std::thread::scope(|scope| -> Result<(), GraphError> {
        let (mut jobs, mut results) = (Vec::new(), Vec::new());
        for _ in 0..WORKERS {
            let (job_tx, job_rx) = mpsc::sync_channel::<Chunk>(IN_FLIGHT_PER_WORKER);
            let (result_tx, result_rx) = mpsc::channel();
            let worker = move || {
                for chunk in job_rx {
                    let parsed = parse(names, version, &chunk);
                    if result_tx.send((chunk, parsed)).is_err() {
                        break; // the reader stopped at an error
                    }
                }
            };
            std::thread::Builder::new()
                .name("profile reader".into())
                .spawn_scoped(scope, worker)
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot start a thread to read the profile: {e}"),
                    )
                })?;
            jobs.push(job_tx);
            results.push(result_rx);
        }
        // Which worker has each chunk in flight, in file order.
        let mut in_flight = VecDeque::new();
        let mut next_worker = 0;
        loop {
            while in_flight.len() < WORKERS * IN_FLIGHT_PER_WORKER {
                let Some(chunk) = source.next_chunk(input)? else {
                    break;
                };
                // Never waits: the loop's bound keeps a worker's queue below its capacity.
                jobs[next_worker]
                    .send(chunk)
                    .expect("a chunk reader's worker panicked");
                in_flight.push_back(next_worker);
                next_worker = (next_worker + 1) % WORKERS;
            }
            let Some(worker) = in_flight.pop_front() else {
                return Ok(());
            };
            let (chunk, parsed) = results[worker]
                .recv()
                .expect("a chunk reader's worker panicked");
            match parsed.end {
                End::Read => {
                    calls.append(parsed.lines);
                    headers.extend(parsed.headers);
                }
                End::Malformed { line, msg } => {
                    return Err(GraphError::Malformed {
                        line: chunk.first_line + line,
                        msg,
                    })
                }
                End::HandBack => {
                    left.push(chunk);
                    for worker in in_flight.drain(..) {
                        let (chunk, _) = results[worker]
                            .recv()
                            .expect("a chunk reader's worker panicked");
                        left.push(chunk);
                    }
                    // The line read ahead to start the next chunk.
                    if let Some(chunk) = source.carried() {
                        left.push(chunk);
                    }
                    return Ok(());
                }
            }
        }
    })?;
    Ok(Left {
        chunks: left,
        next_line: source.next_line,
    })
}

/// Cuts the input into chunks.
struct Source {
    /// The line that starts the next chunk.
    carry: Vec<u8>,
    /// The number of the line in `carry`, or of the next line of the input.
    next_line: usize,
    eof: bool,
    chunk_bytes: usize,
}

impl Source {
    /// Whole lines, at least `chunk_bytes` of them unless the input ends, ending before a
    /// `call` line.
    fn next_chunk(&mut self, input: &mut impl BufRead) -> Result<Option<Chunk>, GraphError> {
        if self.eof {
            return Ok(None);
        }
        let first_line = self.next_line;
        let mut bytes = std::mem::take(&mut self.carry);
        let mut line = Vec::new();
        self.next_line += 1;
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                self.eof = true;
                break;
            }
            if bytes.len() >= self.chunk_bytes && kind(&line) == b"call" {
                self.carry = line;
                break;
            }
            bytes.extend_from_slice(&line);
            self.next_line += 1;
        }
        Ok(Some(Chunk { bytes, first_line }))
    }

    /// The line read ahead to start the next chunk, if any, as a chunk of its own.
    fn carried(&mut self) -> Option<Chunk> {
        if self.carry.is_empty() {
            return None;
        }
        let chunk = Chunk {
            bytes: std::mem::take(&mut self.carry),
            first_line: self.next_line,
        };
        self.next_line += 1;
        Some(chunk)
    }
}

/// Reads a chunk's comments, call and site lines.
fn parse(names: Names<'_>, version: u32, chunk: &Chunk) -> Parsed {
    let mut parsed = Parsed {
        lines: CallLines::default(),
        headers: Vec::new(),
        end: End::Read,
    };
    let mut prefetch = CalleePrefetch::new();
    let mut ahead = chunk.lines().skip(SLOT_AHEAD);
    for (i, raw) in chunk.lines().enumerate() {
        prefetch.step(names, i, ahead.next());
        let Ok(text) = text(raw) else {
            parsed.end = End::HandBack;
            break;
        };
        let (kind, fields) = match record(text) {
            Record::Nothing => continue,
            Record::Header(key, value) => {
                parsed.headers.push((key, value));
                continue;
            }
            Record::Fields(kind, fields) => (kind, fields),
        };
        let read = match kind {
            "call" => {
                parsed.lines.close_call();
                parsed.lines.call(names, version, fields)
            }
            "site" if version >= 2 => parsed.lines.site(names, version, fields),
            _ => {
                parsed.end = End::HandBack;
                break;
            }
        };
        if let Err(msg) = read {
            parsed.end = End::Malformed { line: i, msg };
            break;
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use crate::graph::read::read_in_chunks;
    use crate::graph::Graph;

    /// A v2 profile: header comments, functions, then calls with sites, comments and blank
    /// lines among them.
    fn profile(functions: usize) -> String {
        let mut text = String::from("# hottext profile v2\n# build-id: ab\n");
        for f in 0..functions {
            writeln!(text, "fn f{f} 100 {}", f % 7).unwrap();
        }
        for f in 0..functions {
            let mut callees: Vec<usize> = (1..4).map(|k| (f * 7 + k * 13) % functions).collect();
            callees.sort_unstable();
            callees.dedup();
            for (k, g) in callees.into_iter().filter(|&g| g != f).enumerate() {
                writeln!(text, "call f{f} f{g} 10").unwrap();
                if k == 0 {
                    writeln!(text, "site f{f} f{g} 5 4\nsite f{f} f{g} 9 3").unwrap();
                }
            }
            if f % 50 == 0 {
                text.push_str("# note: among the calls\n\n");
            }
        }
        text
    }

    /// The outcome of reading `input` line by line, then in chunks of several sizes (one
    /// line each, a few lines, many): each must be the same.
    fn assert_same_in_chunks(input: &[u8]) -> Result<Graph, String> {
        let whole = Graph::read(input).map_err(|e| e.to_string());
        let describe = |read: &Result<Graph, String>| match read {
            Ok(g) => format!("{} functions, {} calls", g.funcs().len(), g.calls().len()),
            Err(e) => e.clone(),
        };
        for chunk_bytes in [1, 100, 3000, 1 << 20] {
            let chunked = read_in_chunks(input, chunk_bytes).map_err(|e| e.to_string());
            assert!(
                chunked == whole,
                "chunks of {chunk_bytes} bytes: {} instead of {}",
                describe(&chunked),
                describe(&whole)
            );
        }
        whole
    }

    #[test]
    fn chunks_read_what_lines_read() {
        let graph = assert_same_in_chunks(profile(300).as_bytes()).unwrap();
        assert_eq!(graph.funcs().len(), 300);
        assert_eq!(graph.calls().len(), 900);
        assert_eq!(graph.header("note"), Some("among the calls"));
    }

    /// Each flaw sits deep in the call section, where chunks are read on the workers: the same
    /// error, on the same line, as line by line; a `fn` line among the calls is read as well.
    #[test]
    fn chunks_fail_where_lines_fail() {
        let good = profile(300);
        let late = good.len() * 2 / 3;
        let at = late + good[late..].find("\ncall ").unwrap() + 1;
        let line_end = at + good[at..].find('\n').unwrap() + 1;
        let line = &good[at..line_end];
        let insert = |extra: &str| format!("{}{extra}{}", &good[..at], &good[at..]);
        let replace = |with: &str| format!("{}{with}{}", &good[..at], &good[line_end..]);
        let flawed = [
            replace("call f1 nosuch 10\n"),
            replace(&line.replace(" 10\n", " 10 extra\n")),
            insert("bogus record\n"),
            insert("site f1 f2 5 4\n"),
            insert("call f0 f13 10\n"),
            insert(&line.replace(" 10\n", " 11\n")),
            good.replacen("profile v2", "profile v1", 1),
        ];
        for text in &flawed {
            let err = assert_same_in_chunks(text.as_bytes()).unwrap_err();
            assert!(!err.is_empty());
        }
        let mut not_utf8 = insert("call f1 f2 3\n").into_bytes();
        not_utf8[at + 6] = 0xff;
        assert_same_in_chunks(&not_utf8).unwrap_err();

        let declared_late = insert("fn late 10 0\ncall late f1 5\n");
        let graph = assert_same_in_chunks(declared_late.as_bytes()).unwrap();
        assert_eq!(graph.funcs().len(), 301);
    }
}
