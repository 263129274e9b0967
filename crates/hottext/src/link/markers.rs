//! The markers object: a relocatable ELF file that defines `__hot_start` (in a 2 MiB-aligned
//! empty section) and `__hot_end` (in an empty section), for linkers that take an order file.

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

/// Builds the markers object for `arch` (the target of the binary being linked).
pub fn markers_object(arch: Architecture) -> Result<Vec<u8>, object::write::Error> {
    let mut obj = Object::new(BinaryFormat::Elf, arch, Endianness::Little);
    for (section, symbol, align) in [
        (START_SECTION, HOT_START, HUGE_PAGE),
        (END_SECTION, HOT_END, 1),
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
