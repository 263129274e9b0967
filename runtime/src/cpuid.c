/* How many 2 MiB pages the CPU's instruction TLB can hold, from CPUID.
 *
 * The hfsort paper (section 7.5) found that mapping more text on huge pages
 * than the huge-page iTLB holds made things slower (Ivy Bridge: 8 entries),
 * so the number of pages we map is capped at the first-level count here.
 *
 *   AMD:   leaf 0x80000005 EAX[7:0]  = L1 iTLB entries for 2M/4M pages
 *          (EAX[15:8] is that TLB's associativity, 0xff = fully associative)
 *          leaf 0x80000006 EAX[11:0] = L2 iTLB entries for 2M/4M pages
 *   Intel: leaf 0x18 (deterministic address translation parameters): each
 *          sub-leaf is one TLB; EDX[4:0] type (2 instruction, 3 unified),
 *          EDX[7:5] level, EBX[1] = 2M pages, entries = ways EBX[31:16] *
 *          sets ECX. Older parts describe TLBs with one-byte descriptors in
 *          leaf 0x2 (SDM vol. 2A, table 3-12).
 */
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* Leaf 0x2 descriptors of instruction TLBs that hold 2 MiB pages. */
static unsigned leaf2_itlb_2m(unsigned char d)
{
    switch (d) {
    case 0x50: return 64;  /* iTLB 4K and 2M/4M pages, 64 entries */
    case 0x51: return 128; /* ... 128 entries */
    case 0x52: return 256; /* ... 256 entries */
    case 0x55: return 7;   /* iTLB 2M/4M pages, fully associative, 7 entries */
    case 0x76: return 8;   /* iTLB 2M/4M pages, fully associative, 8 entries */
    case 0xb1: return 8;   /* iTLB 2M pages 4-way 8 entries, or 4M pages 4 entries */
    default: return 0;
    }
}

static void intel(struct hx_itlb *t, unsigned max_leaf)
{
    unsigned a, b, c, d, use18 = 0;
    if (max_leaf >= 2) {
        __cpuid(2, a, b, c, d);
        unsigned regs[4] = {a & ~0xffu, b, c, d}; /* AL is a count, not a descriptor */
        for (int i = 0; i < 4; i++) {
            if (regs[i] & 0x80000000u) /* bit 31 set: register holds no descriptors */
                continue;
            for (int k = 0; k < 4; k++) {
                unsigned char desc = (unsigned char)(regs[i] >> (8 * k));
                if (desc == 0xff)
                    use18 = 1;
                else if (leaf2_itlb_2m(desc) && !t->l1_2m) {
                    t->l1_2m = leaf2_itlb_2m(desc);
                    t->source = "cpuid leaf 0x2";
                }
            }
        }
    }
    if ((use18 || !t->l1_2m) && max_leaf >= 0x18) {
        __cpuid_count(0x18, 0, a, b, c, d);
        unsigned subleafs = a;
        for (unsigned s = 0; s <= subleafs && s < 64; s++) {
            __cpuid_count(0x18, s, a, b, c, d);
            unsigned type = d & 0x1f, level = (d >> 5) & 7, entries = (b >> 16) * c;
            if (!(b & 2) || !entries)
                continue;
            if (type == 2 && level == 1)
                t->l1_2m = entries;
            else if ((type == 2 || type == 3) && level == 2)
                t->l2_2m = entries;
            t->source = "cpuid leaf 0x18";
        }
    }
}

void hottext__itlb_2m(struct hx_itlb *t)
{
    unsigned a, b, c, d;
    memset(t, 0, sizeof *t);
    t->source = "unknown";
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    unsigned max_leaf = a;
    int amd = (b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163) ||  /* AuthenticAMD */
              (b == 0x6f677948 && d == 0x6e65476e && c == 0x656e6975);    /* HygonGenuine */
    if (!amd) {
        intel(t, max_leaf);
        return;
    }
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000005) {
        __cpuid(0x80000005, a, b, c, d);
        t->l1_2m = a & 0xff;
        t->source = "cpuid 0x80000005/0x80000006";
        __cpuid(0x80000000, a, b, c, d);
        if (a >= 0x80000006) {
            __cpuid(0x80000006, a, b, c, d);
            t->l2_2m = a & 0xfff;
        }
    }
}

#else

void hottext__itlb_2m(struct hx_itlb *t)
{
    memset(t, 0, sizeof *t);
    t->source = "unknown (not x86)";
}

#endif
