//! A running service's checks: its THP switch, its cgroup's memory limit, context switches,
//! NUMA placement of its text, the allocator it uses, its CPUs, and its hot range's pages.

use std::time::Duration;

use super::{build_remedy, Check, Status};
use crate::os::proc::{self, status_field, Pid};
use crate::os::sys;
use crate::verify::check_process;

const AREA: &str = "service";

/// The systemd unit a process runs in, from its cgroup (`0::/system.slice/db.service`).
fn systemd_unit(pid: Pid) -> Option<String> {
    proc::cgroups(pid)
        .iter()
        .flat_map(|group| group.path.split('/').rev())
        .find(|part| part.ends_with(".service"))
        .map(str::to_string)
}

/// Whether the process may make a copy of its text executable, which the runtime needs when
/// the kernel cannot map the file's text on 2 MiB pages. prctl(PR_SET_MDWE) is visible only to
/// the process itself (the runtime reports it under HOTTEXT_VERBOSE=1); what shows from outside
/// is systemd's MemoryDenyWriteExecute= and a seccomp filter.
fn write_execute(pid: Pid) -> Check {
    const NAME: &str = "write-execute policy";
    let unit = systemd_unit(pid);
    let denied = unit.as_ref().and_then(|unit| {
        let out = std::process::Command::new("systemctl")
            .args([
                "show",
                "--property=MemoryDenyWriteExecute",
                "--value",
                "--",
                unit,
            ])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).trim() == "yes")
    });
    if let (Some(unit), Some(true)) = (&unit, denied) {
        return Check::new(
            AREA,
            NAME,
            Status::Warn,
            format!("{unit} has MemoryDenyWriteExecute=yes: the runtime may use only file-backed 2 MiB pages (see file text on 2 MiB pages)"),
        )
        .remedy(format!(
            "systemctl edit {unit}: MemoryDenyWriteExecute=no, or keep it where the filesystem maps text on 2 MiB pages"
        ));
    }
    match status_field(pid, "Seccomp").as_deref() {
        Some("0") | None => Check::new(
            AREA,
            NAME,
            Status::Pass,
            "no seccomp filter (an MDWE prctl shows only inside: HOTTEXT_VERBOSE=1)",
        ),
        Some(mode) => Check::new(
            AREA,
            NAME,
            Status::Info,
            format!(
                "seccomp mode {mode}, {} filter(s): if one refuses mprotect(PROT_EXEC), only file-backed 2 MiB pages work",
                status_field(pid, "Seccomp_filters").unwrap_or_else(|| "?".into())
            ),
        )
        .remedy("run the service once with HOTTEXT_VERBOSE=1: the runtime says which backing it got and why"),
    }
}

/// The path of the process's executable as its maps name it (` (deleted)` after an upgrade).
fn exe_path(pid: Pid) -> Option<String> {
    proc::exe(pid)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// The pages per node (`N0=12 N1=3`) of the executable mapping of `exe`: its line in `maps`
/// (`start-end r-xp offset dev inode path`), found in `numa_maps` by its start address.
fn text_pages_by_node(maps: &str, numa_maps: &str, exe: &str) -> Option<String> {
    let start = maps.lines().find_map(|line| {
        let mut fields = line.splitn(6, ' ');
        let (range, perms) = (fields.next()?, fields.next()?);
        let path = fields.nth(3)?.trim_start();
        (perms.contains('x') && path == exe).then(|| range.split('-').next())?
    })?;
    let line = numa_maps
        .lines()
        .find(|l| l.split(' ').next() == Some(start))?;
    Some(
        line.split_whitespace()
            .filter(|w| w.starts_with('N') && w.contains('='))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// `links_runtime`: whether the process's binary is linked with the runtime (`None`: unknown),
/// which decides the remedy for a hot range off huge pages.
pub fn checks(pid: Pid, interval: Duration, links_runtime: Option<bool>, rust: bool) -> Vec<Check> {
    let mut out = Vec::new();
    match status_field(pid, "THP_enabled").as_deref() {
        Some("0") => out.push(
            Check::new(
                AREA,
                "THP for the process",
                Status::Fail,
                "disabled by prctl(PR_SET_THP_DISABLE)",
            )
            .remedy(
                "remove the prctl(PR_SET_THP_DISABLE) call, or the launcher setting that makes it",
            ),
        ),
        Some(_) => out.push(Check::new(
            AREA,
            "THP for the process",
            Status::Pass,
            "enabled",
        )),
        None => {}
    }
    out.push(write_execute(pid));
    out.push(match sys::cgroup_memory_limit(pid) {
        Some(limit) => Check::new(
            AREA,
            "cgroup memory limit",
            Status::Info,
            format!("{} MiB", limit >> 20),
        ),
        None => Check::new(AREA, "cgroup memory limit", Status::Info, "none"),
    });
    let before = proc::context_switches(pid);
    std::thread::sleep(interval);
    let per_second =
        (proc::context_switches(pid).saturating_sub(before)) as f64 / interval.as_secs_f64();
    out.push(Check::new(
        AREA,
        "context switches",
        if per_second > 10_000.0 {
            Status::Warn
        } else {
            Status::Info
        },
        format!("{per_second:.0} a second"),
    ));
    let nodes = sys::numa_nodes();
    let maps = proc::maps(pid);
    let text_nodes = maps.as_deref().and_then(|maps| {
        let numa_maps = proc::numa_maps(pid)?;
        text_pages_by_node(maps, &numa_maps, &exe_path(pid)?)
    });
    out.push(Check::new(
        AREA,
        "NUMA",
        if nodes > 1 {
            Status::Warn
        } else {
            Status::Info
        },
        format!(
            "{nodes} node(s); the binary's text on {}",
            text_nodes
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "?".into())
        ),
    ));
    let allocator = match &maps {
        Some(maps) => ["jemalloc", "tcmalloc", "mimalloc"]
            .into_iter()
            .find(|a| maps.contains(&format!("lib{a}")))
            .unwrap_or("glibc malloc"),
        None => "? (its maps are not readable here)",
    };
    out.push(Check::new(AREA, "allocator", Status::Info, allocator));
    out.push(Check::new(
        AREA,
        "CPU affinity",
        Status::Info,
        status_field(pid, "Cpus_allowed_list").unwrap_or_else(|| "?".into()),
    ));
    out.push(match check_process(pid, None) {
        Ok(r) if r.passed() => Check::new(
            AREA,
            "hot range on huge pages",
            Status::Pass,
            format!("{} of {} pages", r.huge_pages, r.pages.len()),
        ),
        Ok(r) => Check::new(
            AREA,
            "hot range on huge pages",
            Status::Warn,
            format!("{} of {} pages", r.huge_pages, r.pages.len()),
        )
        .remedy(off_huge_pages_remedy(links_runtime, rust, maps.as_deref())),
        Err(e) => Check::new(AREA, "hot range on huge pages", Status::Info, e.to_string()),
    });
    out
}

/// What to do about a hot range off huge pages: link the runtime, or, when it is there (linked
/// or preloaded), find out why it declined. `rust`: the binary is a Rust program, built by Cargo.
fn off_huge_pages_remedy(links_runtime: Option<bool>, rust: bool, maps: Option<&str>) -> String {
    let preloaded = maps.is_some_and(|m| m.contains("libhottext_preload.so"));
    if links_runtime == Some(true) || preloaded {
        "the runtime is there but mapped nothing: restart with HOTTEXT_VERBOSE=1 for its reason (RANGE_TOO_SMALL: write the linker input again, hottext order pads the range to whole 2 MiB pages by default, and relink), and see the huge-pages checks above".into()
    } else {
        build_remedy(
            rust,
            "link -lhottext_auto, and see the huge-pages checks above",
            "-L native=runtime/build/lib -C link-arg=-lhottext_auto after cargo rustc's -- (docs/build.md)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_mapping_is_found_by_its_address_not_the_first_line_of_the_file() {
        let maps = "5555aa000000-5555aa001000 r--p 00000000 08:01 42    /usr/bin/srv\n\
                    5555aa001000-5555aa200000 r-xp 00001000 08:01 42    /usr/bin/srv\n\
                    5555ab000000-5555ab100000 r-xp 00000000 08:01 43    /usr/bin/srv-helper\n";
        let numa_maps = "5555aa000000 default file=/usr/bin/srv mapped=1 N0=1\n\
                         5555aa001000 default file=/usr/bin/srv mapped=300 N0=100 N1=200\n\
                         5555ab000000 default file=/usr/bin/srv-helper mapped=5 N1=5\n";
        assert_eq!(
            text_pages_by_node(maps, numa_maps, "/usr/bin/srv").as_deref(),
            Some("N0=100 N1=200")
        );
        assert_eq!(text_pages_by_node(maps, numa_maps, "/usr/bin/other"), None);
    }

    #[test]
    fn a_process_with_the_runtime_is_not_told_to_link_it() {
        let link = "link -lhottext_auto";
        assert!(off_huge_pages_remedy(Some(false), false, None).starts_with(link));
        assert!(off_huge_pages_remedy(
            None,
            false,
            Some("7f00-7f01 r-xp 0 0:1 2 /lib/libc.so.6\n")
        )
        .starts_with(link));
        assert!(off_huge_pages_remedy(Some(true), false, None).contains("RANGE_TOO_SMALL"));
        let preloaded = "7f00-7f01 r-xp 0 0:1 2 /usr/local/lib/libhottext_preload.so\n";
        assert!(!off_huge_pages_remedy(None, false, Some(preloaded)).starts_with(link));
        // A Rust program is told the Cargo way too.
        assert!(off_huge_pages_remedy(Some(false), true, None).contains("Cargo: -L native="));
    }
}
