/* The running executable: its load bias and build-id from the loader, its
 * symbols from the ELF file behind /proc/self/exe.
 *
 * The file is mmap()ed read-only, not read into the heap; every offset and
 * index taken from it is checked against its size, since a file can be cut
 * or hostile. The markers of a binary that does not export them live only in
 * .symtab, which no loader API can see, hence our own reader. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

struct first_obj {
    const ElfW(Phdr) *phdr;
    size_t phnum;
    uintptr_t bias;
    int seen;
};

/* glibc reports the main program first, in dynamic and static programs. */
static int first_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct first_obj *f = arg;
    f->phdr = info->dlpi_phdr;
    f->phnum = info->dlpi_phnum;
    f->bias = (uintptr_t)info->dlpi_addr;
    f->seen = 1;
    return 1; /* stop after the first */
}

static int main_program(struct first_obj *f)
{
    memset(f, 0, sizeof *f);
    dl_iterate_phdr(first_cb, f);
    return f->seen && f->phdr ? 0 : -1;
}

int hottext__exe_info(struct hx_exe *out)
{
    struct first_obj f;
    memset(out, 0, sizeof *out);
    if (main_program(&f) < 0)
        return -1;
    out->bias = f.bias;
    out->text_lo = UINTPTR_MAX;
    for (size_t i = 0; i < f.phnum; i++) {
        const ElfW(Phdr) *p = &f.phdr[i];
        if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
            uintptr_t lo = f.bias + p->p_vaddr, hi = lo + p->p_memsz;
            if (lo < out->text_lo)
                out->text_lo = lo;
            if (hi > out->text_hi)
                out->text_hi = hi;
        }
        if (p->p_type == PT_NOTE && !out->build_id) {
            /* Notes are in loaded memory: walk them for NT_GNU_BUILD_ID. */
            const unsigned char *n = (const unsigned char *)(f.bias + p->p_vaddr), *end = n + p->p_memsz;
            size_t align = p->p_align == 8 ? 8 : 4;
            while (n + sizeof(ElfW(Nhdr)) <= end) {
                const ElfW(Nhdr) *h = (const ElfW(Nhdr) *)n;
                size_t name_sz = (h->n_namesz + align - 1) & ~(align - 1);
                size_t desc_sz = (h->n_descsz + align - 1) & ~(align - 1);
                const unsigned char *name = n + sizeof *h, *desc = name + name_sz;
                if (desc + desc_sz > end)
                    break;
                if (h->n_type == NT_GNU_BUILD_ID && h->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                    out->build_id = desc;
                    out->build_id_len = h->n_descsz;
                    break;
                }
                n = desc + desc_sz;
            }
        }
    }
    if (out->text_lo == UINTPTR_MAX)
        out->text_lo = 0;
    return 0;
}

static int in_file(const struct hx_elf *e, uint64_t off, uint64_t len)
{
    return off <= e->size && len <= e->size - off;
}

int hottext__elf_open_self(struct hx_elf *e, char *why, size_t whylen)
{
    memset(e, 0, sizeof *e);
    struct first_obj f;
    if (main_program(&f) < 0) {
        snprintf(why, whylen, "the loader reports no main program");
        errno = ENOEXEC;
        return -1;
    }
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int err = errno;
        snprintf(why, whylen, "cannot open /proc/self/exe (%s)", hottext__errname(err));
        if (fd >= 0)
            close(fd);
        errno = err;
        return -1;
    }
    if (st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
        snprintf(why, whylen, "/proc/self/exe is too short for an ELF file");
        close(fd);
        errno = ENOEXEC;
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, whylen, "cannot map /proc/self/exe (%s)", hottext__errname(err));
        errno = err;
        return -1;
    }
    e->map = m;
    e->size = (size_t)st.st_size;
    e->bias = f.bias;
    const ElfW(Ehdr) *h = m;
    if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        h->e_phentsize != sizeof(ElfW(Phdr)) || !in_file(e, h->e_phoff, (uint64_t)h->e_phnum * sizeof(ElfW(Phdr)))) {
        snprintf(why, whylen, "/proc/self/exe is not a native ELF file");
        hottext__elf_close(e);
        errno = ENOEXEC;
        return -1;
    }
    /* Programs started as "ld.so ./prog" have ld.so as /proc/self/exe: make
     * sure the file's segments are the ones the loader mapped. */
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(e->map + h->e_phoff);
    int same = h->e_phnum == f.phnum;
    for (size_t i = 0; same && i < f.phnum; i++)
        same = ph[i].p_type == f.phdr[i].p_type && ph[i].p_vaddr == f.phdr[i].p_vaddr &&
               ph[i].p_memsz == f.phdr[i].p_memsz && ph[i].p_flags == f.phdr[i].p_flags;
    if (!same) {
        snprintf(why, whylen, "/proc/self/exe is not the running program (started through ld.so?)");
        hottext__elf_close(e);
        errno = ENOEXEC;
        return -1;
    }
    return 0;
}

void hottext__elf_close(struct hx_elf *e)
{
    if (e->map)
        munmap((void *)e->map, e->size);
    e->map = NULL;
}

/* The section headers of a symbol table of the given type and its strings. */
static int symtab(const struct hx_elf *e, unsigned type, const ElfW(Sym) **syms, size_t *n, const char **str,
                  size_t *strsz)
{
    const ElfW(Ehdr) *h = (const ElfW(Ehdr) *)e->map;
    if (h->e_shentsize != sizeof(ElfW(Shdr)) || !in_file(e, h->e_shoff, (uint64_t)h->e_shnum * sizeof(ElfW(Shdr))))
        return -1;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(e->map + h->e_shoff);
    for (size_t i = 0; i < h->e_shnum; i++) {
        if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(ElfW(Sym)) || sh[i].sh_link >= h->e_shnum)
            continue;
        const ElfW(Shdr) *s = &sh[sh[i].sh_link];
        if (!in_file(e, sh[i].sh_offset, sh[i].sh_size) || !in_file(e, s->sh_offset, s->sh_size) || s->sh_size == 0)
            continue;
        *syms = (const ElfW(Sym) *)(e->map + sh[i].sh_offset);
        *n = sh[i].sh_size / sizeof(ElfW(Sym));
        *str = (const char *)(e->map + s->sh_offset);
        *strsz = s->sh_size;
        return 0;
    }
    return -1;
}

/* The symbol's name if it is NUL-terminated inside the string table. */
static const char *sym_name(const ElfW(Sym) *s, const char *str, size_t strsz)
{
    if (s->st_name >= strsz || !memchr(str + s->st_name, '\0', strsz - s->st_name))
        return NULL;
    return str + s->st_name;
}

int hottext__elf_lookup(const struct hx_elf *e, const char *name, uint64_t *value)
{
    static const unsigned types[2] = {SHT_SYMTAB, SHT_DYNSYM};
    for (int t = 0; t < 2; t++) {
        const ElfW(Sym) *syms;
        const char *str;
        size_t n, strsz;
        if (symtab(e, types[t], &syms, &n, &str, &strsz) < 0)
            continue;
        for (size_t i = 1; i < n; i++) {
            if (syms[i].st_shndx == SHN_UNDEF)
                continue;
            const char *nm = sym_name(&syms[i], str, strsz);
            if (nm && !strcmp(nm, name)) {
                *value = syms[i].st_value;
                return 0;
            }
        }
    }
    return -1;
}

long hottext__elf_each_func(const struct hx_elf *e, uint64_t lo, uint64_t hi, hx_func_cb *cb, void *arg)
{
    const ElfW(Sym) *syms;
    const char *str;
    size_t n, strsz;
    if (symtab(e, SHT_SYMTAB, &syms, &n, &str, &strsz) < 0 && symtab(e, SHT_DYNSYM, &syms, &n, &str, &strsz) < 0)
        return -1;
    long calls = 0;
    for (size_t i = 1; i < n; i++) {
        const ElfW(Sym) *s = &syms[i];
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF || s->st_size == 0)
            continue;
        if (s->st_value >= hi || s->st_value + s->st_size <= lo)
            continue;
        const char *nm = sym_name(s, str, strsz);
        if (!nm || !*nm)
            continue;
        cb(arg, s->st_value, s->st_size, nm);
        calls++;
    }
    return calls;
}
