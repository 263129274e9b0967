//! Which compiler built a binary, where the advice differs: a Rust program's build flags are
//! Cargo settings, not compiler options.

use object::{Object, ObjectSection, ObjectSymbol};

/// Whether the ELF file `data` is a Rust program: rustc leaves `rustc version …` in `.comment`
/// (a stripped binary keeps it), and where a tool removed that section, the standard library's
/// panic entry and allocator shims (`rust_begin_unwind`, `__rust_alloc`, …) still name it in
/// whatever symbol table is left.
pub fn built_by_rustc(data: &[u8]) -> bool {
    let Ok(file) = object::File::parse(data) else {
        return false;
    };
    let noted = file
        .section_by_name(".comment")
        .and_then(|s| s.data().ok())
        .is_some_and(|text| text.windows(RUSTC_NOTE.len()).any(|w| w == RUSTC_NOTE));
    noted
        || file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter_map(|s| s.name().ok())
            .any(|name| name.contains("rust_begin_unwind") || name.starts_with("__rust_"))
}

/// What rustc writes into `.comment`.
const RUSTC_NOTE: &[u8] = b"rustc version ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_a_rust_program_and_a_shell_is_not() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(built_by_rustc(&me));
        let sh = std::fs::read("/bin/sh").unwrap();
        assert!(!built_by_rustc(&sh));
        assert!(!built_by_rustc(b"not an ELF file"));
    }
}
