//! Where the binary is mapped in each recorded process, and which mmap records are the binary.
//!
//! perf records a mmap record for every executable mapping (synthesized from /proc for processes
//! that already ran). A PIE is mapped at a bias chosen at run time, so a sample address is
//! turned into a file offset through its mapping (`pgoff + addr - start`), and the file offset
//! into a stated address through the ELF segments: this works for PIE and non-PIE alike.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use foldhash::HashMap;
use object::{Object, ObjectSegment};

use crate::binary::{Binary, FileOffset, RuntimeAddr};
use crate::os::proc::Pid;

/// One mapping of the binary's file into a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
}

/// The binary's mappings, per process id.
#[derive(Debug, Default)]
pub(crate) struct BinaryMappings {
    by_pid: HashMap<Pid, Vec<Mapping>>,
}

impl BinaryMappings {
    /// A new executable mapping of any file replaces the binary's mappings it overlaps, as the
    /// kernel does; `is_binary` says whether the new one is the binary itself.
    pub fn map(&mut self, pid: Pid, start: u64, len: u64, pgoff: u64, is_binary: bool) {
        let end = start.saturating_add(len);
        if let Some(maps) = self.by_pid.get_mut(&pid) {
            maps.retain(|m| m.end <= start || m.start >= end);
        }
        if is_binary {
            self.by_pid
                .entry(pid)
                .or_default()
                .push(Mapping { start, end, pgoff });
        }
    }

    /// A forked process starts with its parent's mappings (perf records no mmap for them).
    pub fn fork(&mut self, parent: i32, child: i32) {
        if let Some(maps) = self.by_pid.get(&parent).cloned() {
            self.by_pid.insert(child, maps);
        }
    }

    /// After exec the old image is gone; the new one comes with its own mmap records.
    pub fn exec(&mut self, pid: Pid) {
        self.by_pid.remove(&pid);
    }

    /// Whether process `pid` has the binary mapped now.
    pub(crate) fn runs_binary(&self, pid: Pid) -> bool {
        self.by_pid.get(&pid).is_some_and(|maps| !maps.is_empty())
    }

    /// The offset in the binary's file of `addr` in process `pid`, if the binary is mapped there.
    pub(crate) fn file_offset(&self, pid: Pid, addr: RuntimeAddr) -> Option<FileOffset> {
        let m = self
            .by_pid
            .get(&pid)?
            .iter()
            .find(|m| addr.0 >= m.start && addr.0 < m.end)?;
        Some(FileOffset(m.pgoff + (addr.0 - m.start)))
    }
}

/// How a mapping was recognised as the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum MatchedBy {
    /// Same build-id (from the mmap record or perf's build-id table).
    BuildId,
    /// Same path: perf.data holds no build-id for the file, or the binary has none.
    Path,
    /// Same file name at another path, without a build-id to decide, and the file at that path
    /// on this machine has the binary's code (the same bytes in its executable segments).
    NameAndCode,
    /// Same file name at another path, without a build-id to decide; no file is at that path
    /// here, so the code could not be compared.
    NameOnly,
    /// Same file name but another build-id, accepted because the caller allowed it.
    MismatchAllowed,
}

/// What one mmap record is, from the binary's point of view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Binary(MatchedBy),
    /// The binary's name with another build-id: another build of it.
    OtherBuild {
        build_id: Vec<u8>,
    },
    /// The binary's name without a build-id to decide, but the file at that path has other code.
    OtherCode,
    Other,
}

/// What the file at a mapping's path says about its code, compared with the binary's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CodeCheck {
    Same,
    Differs,
    /// No readable regular file at that path on this machine.
    Unavailable,
}

/// The facts about the binary that identify it in mmap records.
pub(crate) struct Identity {
    build_id: Option<Vec<u8>>,
    /// The binary's absolute path, as the kernel would write it in a mmap record.
    path: Vec<u8>,
    file_name: Vec<u8>,
    allow_mismatch: bool,
    /// Code checks of same-named files at other paths, once per path.
    code_checks: HashMap<Vec<u8>, CodeCheck>,
}

impl Identity {
    pub fn new(binary: &Binary, allow_mismatch: bool) -> Identity {
        let path = std::fs::canonicalize(&binary.path).unwrap_or_else(|_| binary.path.clone());
        Identity {
            build_id: binary.build_id.clone(),
            path: path.as_os_str().as_encoded_bytes().to_vec(),
            file_name: binary
                .path
                .file_name()
                .map(|n| n.as_encoded_bytes().to_vec())
                .unwrap_or_default(),
            allow_mismatch,
            code_checks: HashMap::default(),
        }
    }

    /// Judges a mapping of `path`, whose build-id perf recorded as `recorded` (if it did): by
    /// build-id, else by path, else by file name confirmed by the code of the file at `path`.
    pub fn judge(&mut self, binary: &Binary, path: &[u8], recorded: Option<&[u8]>) -> Verdict {
        if !self.same_name_only(path, recorded) {
            return self.judge_by_id_and_path(path, recorded);
        }
        let check = *self
            .code_checks
            .entry(path.to_vec())
            .or_insert_with(|| check_code(binary, path));
        match check {
            CodeCheck::Same => Verdict::Binary(MatchedBy::NameAndCode),
            CodeCheck::Unavailable => Verdict::Binary(MatchedBy::NameOnly),
            CodeCheck::Differs if self.allow_mismatch => {
                Verdict::Binary(MatchedBy::MismatchAllowed)
            }
            CodeCheck::Differs => Verdict::OtherCode,
        }
    }

    /// A mapping of the binary's file name at another path, with no pair of build-ids to decide.
    fn same_name_only(&self, path: &[u8], recorded: Option<&[u8]>) -> bool {
        let ids_decide = recorded.is_some() && self.build_id.is_some();
        !ids_decide
            && path != self.path.as_slice()
            && !self.file_name.is_empty()
            && file_name(path) == self.file_name.as_slice()
    }

    /// The binary's file name, to leave its namesakes out of the files an error lists.
    pub(crate) fn has_its_name(&self, path: &[u8]) -> bool {
        file_name(path) == self.file_name.as_slice()
    }

    fn judge_by_id_and_path(&self, path: &[u8], recorded: Option<&[u8]>) -> Verdict {
        let same_path = path == self.path.as_slice();
        match (recorded, &self.build_id) {
            (Some(theirs), Some(ours)) if theirs == ours.as_slice() => {
                Verdict::Binary(MatchedBy::BuildId)
            }
            (Some(theirs), Some(_)) => {
                if !same_path && file_name(path) != self.file_name.as_slice() {
                    Verdict::Other
                } else if self.allow_mismatch {
                    Verdict::Binary(MatchedBy::MismatchAllowed)
                } else {
                    Verdict::OtherBuild {
                        build_id: theirs.to_vec(),
                    }
                }
            }
            _ if same_path => Verdict::Binary(MatchedBy::Path),
            _ => Verdict::Other,
        }
    }
}

/// Whether the file at `path` has the binary's code: the same bytes in each executable segment,
/// at the same file offsets, so that the samples' file offsets mean the same instructions. (A
/// stripped copy passes: strip keeps the loaded segments.)
fn check_code(binary: &Binary, path: &[u8]) -> CodeCheck {
    let path = Path::new(std::ffi::OsStr::from_bytes(path));
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return CodeCheck::Unavailable;
    }
    let Ok(bytes) = std::fs::read(path) else {
        return CodeCheck::Unavailable;
    };
    let Ok(file) = object::File::parse(&*bytes) else {
        return CodeCheck::Differs;
    };
    let theirs: Vec<(u64, Option<&[u8]>)> = file
        .segments()
        .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.contains(object::elf::PF_X)))
        .map(|s| (s.file_range().0, s.data().ok()))
        .collect();
    let ours: Vec<(u64, Option<&[u8]>)> = binary
        .exec_segments
        .iter()
        .map(|s| {
            let start = usize::try_from(s.offset.0).ok();
            let end = usize::try_from(s.offset.0.saturating_add(s.file_size)).ok();
            let data = start.zip(end).and_then(|(a, b)| binary.bytes().get(a..b));
            (s.offset.0, data)
        })
        .collect();
    if !ours.is_empty() && ours == theirs {
        CodeCheck::Same
    } else {
        CodeCheck::Differs
    }
}

fn file_name(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// A path from a record, for messages.
pub(crate) fn display_path(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(build_id: Option<&[u8]>, allow_mismatch: bool) -> Identity {
        Identity {
            build_id: build_id.map(<[u8]>::to_vec),
            path: b"/srv/bin/server".to_vec(),
            file_name: b"server".to_vec(),
            allow_mismatch,
            code_checks: HashMap::default(),
        }
    }

    #[test]
    fn offset_in_a_pie_mapping_removes_the_load_bias() {
        let mut m = BinaryMappings::default();
        // A PIE's text: file offset 0x1000 mapped at 0x5555_5555_5000.
        m.map(7, 0x5555_5555_5000, 0x2000, 0x1000, true);
        assert_eq!(
            m.file_offset(7, RuntimeAddr(0x5555_5555_5123)),
            Some(FileOffset(0x1123))
        );
        assert_eq!(
            m.file_offset(7, RuntimeAddr(0x5555_5555_7000)),
            None,
            "end is exclusive"
        );
        assert_eq!(
            m.file_offset(8, RuntimeAddr(0x5555_5555_5123)),
            None,
            "other process"
        );
    }

    #[test]
    fn a_new_mapping_replaces_the_binary_where_it_overlaps() {
        let mut m = BinaryMappings::default();
        m.map(7, 0x1000, 0x1000, 0, true);
        m.map(7, 0x1800, 0x100, 0, false);
        assert_eq!(m.file_offset(7, RuntimeAddr(0x1000)), None);
        assert!(m.by_pid[&7].is_empty());
    }

    #[test]
    fn fork_inherits_and_exec_forgets() {
        let mut m = BinaryMappings::default();
        m.map(7, 0x1000, 0x1000, 0, true);
        m.fork(7, 9);
        assert_eq!(m.file_offset(9, RuntimeAddr(0x1004)), Some(FileOffset(4)));
        m.exec(9);
        assert_eq!(m.file_offset(9, RuntimeAddr(0x1004)), None);
        assert_eq!(m.file_offset(7, RuntimeAddr(0x1004)), Some(FileOffset(4)));
    }

    #[test]
    fn build_id_decides_whatever_the_path() {
        let id = identity(Some(b"\x01\x02"), false);
        assert_eq!(
            id.judge_by_id_and_path(b"/tmp/copy-of-server", Some(b"\x01\x02")),
            Verdict::Binary(MatchedBy::BuildId)
        );
        assert_eq!(
            id.judge_by_id_and_path(b"/srv/bin/server", Some(b"\x09")),
            Verdict::OtherBuild {
                build_id: b"\x09".to_vec()
            }
        );
        assert_eq!(
            id.judge_by_id_and_path(b"/old/server", Some(b"\x09")),
            Verdict::OtherBuild {
                build_id: b"\x09".to_vec()
            },
            "same file name is another build"
        );
        assert_eq!(
            id.judge_by_id_and_path(b"/usr/lib/libc.so.6", Some(b"\x09")),
            Verdict::Other
        );
    }

    #[test]
    fn mismatch_is_used_only_when_allowed() {
        let id = identity(Some(b"\x01"), true);
        assert_eq!(
            id.judge_by_id_and_path(b"/srv/bin/server", Some(b"\x09")),
            Verdict::Binary(MatchedBy::MismatchAllowed)
        );
        assert_eq!(
            id.judge_by_id_and_path(b"/usr/lib/libc.so.6", Some(b"\x09")),
            Verdict::Other
        );
    }

    #[test]
    fn path_is_the_fallback_without_build_ids() {
        let id = identity(Some(b"\x01"), false);
        assert_eq!(
            id.judge_by_id_and_path(b"/srv/bin/server", None),
            Verdict::Binary(MatchedBy::Path)
        );
        assert_eq!(
            id.judge_by_id_and_path(b"/elsewhere/server", None),
            Verdict::Other
        );
        assert!(
            id.same_name_only(b"/elsewhere/server", None),
            "the code decides"
        );
        assert!(!id.same_name_only(b"/elsewhere/server", Some(b"\x09")));
        assert!(!id.same_name_only(b"/srv/bin/server", None));
        assert!(!id.same_name_only(b"/srv/bin/other", None));
        let no_id = identity(None, false);
        assert!(no_id.same_name_only(b"/elsewhere/server", Some(b"\x09")));
        assert_eq!(
            no_id.judge_by_id_and_path(b"/srv/bin/server", Some(b"\x09")),
            Verdict::Binary(MatchedBy::Path)
        );
    }
}
