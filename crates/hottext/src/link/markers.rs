//! The markers object: a relocatable ELF file that defines `__hot_start` (in a 2 MiB-aligned
//! empty section) and `__hot_end` (in an empty section, 2 MiB-aligned too when the hot range is
//! padded to whole pages, see [`super::Padding`]), for linkers that take an order file.

use object::write::{Object, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
};

use super::{END_SECTION, START_SECTION};
use crate::binary::{HOT_END, HOT_START, HUGE_PAGE};

/// The architecture hottext was built for: the target of a link when no binary says otherwise.
pub fn host_architecture() -> Architecture {
    if cfg!(target_arch = "aarch64") {
        Architecture::Aarch64
    } else {
        Architecture::X86_64
    }
}

/// Builds the markers object for `arch` (the target of the binary being linked); with
/// `pad_to_huge_page` the end section's alignment pads the hot range to whole 2 MiB pages.
pub fn markers_object(
    arch: Architecture,
    pad_to_huge_page: bool,
) -> Result<Vec<u8>, object::write::Error> {
    let mut obj = Object::new(BinaryFormat::Elf, arch, Endianness::Little);
    let end_align = if pad_to_huge_page { HUGE_PAGE } else { 1 };
    for (section, symbol, align) in [
        (START_SECTION, HOT_START, HUGE_PAGE),
        (END_SECTION, HOT_END, end_align),
    ] {
        let id = obj.add_section(Vec::new(), section.as_bytes().to_vec(), SectionKind::Text);
        obj.section_mut(id).set_data(Vec::<u8>::new(), align);
        obj.add_symbol(Symbol {
            name: symbol.as_bytes().to_vec(),
            value: 0,
            size: 0,
            kind: SymbolKind::Label,
            // Global for the link, hidden from the dynamic symbol table.
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(id),
            flags: SymbolFlags::None,
        });
    }
    obj.write()
}

#[cfg(test)]
mod tests {
    use object::{Object as _, ObjectSection as _};

    use super::*;

    fn end_alignment(pad: bool) -> u64 {
        let bytes = markers_object(Architecture::X86_64, pad).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let end = file.section_by_name(END_SECTION).unwrap();
        end.align()
    }

    #[test]
    fn the_end_section_is_aligned_only_when_padding() {
        assert_eq!(end_alignment(true), HUGE_PAGE);
        assert_eq!(end_alignment(false), 1);
    }
}
