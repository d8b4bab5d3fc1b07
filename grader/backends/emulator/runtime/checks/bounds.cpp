// The runtime, checks: device allocations and the bounds of global and shared memory.
#include "checks/checks.h"
#include "block/rounds.h"

namespace sg::rt {

// Index of the first allocation whose base is above addr (allocs are sorted by base).
size_t alloc_above(Launch *L, uintptr_t addr) {
    auto &v = L->allocs;
    size_t lo = 0, hi = v.size();
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].base <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// The allocation holding addr, or nullptr.
Alloc *find_alloc(Launch *L, uintptr_t addr) {
    size_t i = alloc_above(L, addr);
    if (i == 0) return nullptr;
    Alloc *a = &L->allocs[i - 1];
    return addr < a->base + a->size ? a : nullptr;
}

// The buffer of an allocation: its labelled elements, else all of it, as [lo, hi).
void buffer_range(const Alloc &a, uintptr_t *lo, uintptr_t *hi) {
    *lo = a.elem ? a.base + a.lo * a.elem : a.base;
    *hi = a.elem ? *lo + a.count * a.elem : a.base + a.size;
}

// For [addr, addr + size) outside every allocation: the nearest one within kNearBytes, by the
// distance to its buffer: the one below (addr past its end) or the one above (before its start),
// the one below on a tie; nullptr when none is that near.
const Alloc *nearest_alloc(Launch *L, uintptr_t addr, unsigned size) {
    size_t i = alloc_above(L, addr);
    const Alloc *below = i > 0 ? &L->allocs[i - 1] : nullptr, *above = i < L->allocs.size() ? &L->allocs[i] : nullptr;
    if (below && addr - (below->base + below->size) > kNearBytes) below = nullptr;
    if (above && above->base - (addr + size) > kNearBytes) above = nullptr;
    if (!below || !above) return below ? below : above;
    uintptr_t blo, bhi, alo, ahi;
    buffer_range(*below, &blo, &bhi);
    buffer_range(*above, &alo, &ahi);
    return addr + size - bhi <= alo - addr ? below : above;
}

bool in_module(uintptr_t addr) {
    for (auto &s : g_segments)
        if (addr >= s.first && addr < s.second) return true;
    return false;
}

[[noreturn]] void bad_access(Fiber *f, Kind kind, uintptr_t pc, const std::string &msg) {
    Finding fd = make_finding(f, kind);
    loc_pc(fd.loc, sizeof fd.loc, pc);
    std::snprintf(fd.msg, sizeof fd.msg, "%s", msg.c_str());
    fatal_finding(f, fd);
}

const char *access_noun(int kind) { return kind == 0 ? "read" : kind == 1 ? "write" : "atomic update"; }

// "name[i] (...)": element i of an array of `count` elements of `elem` bytes starting at `base`.
std::string element_text(const char *name, const char *what, uintptr_t base, uint64_t count, size_t elem,
                         uintptr_t addr) {
    long long d = (long long)(addr - base), i = d >= 0 ? d / (long long)elem : -((-d + (long long)elem - 1) / (long long)elem);
    std::string where = i < 0 ? format("%lld before the start of ", -i)
                        : uint64_t(i) >= count ? format("%llu past the end of ", (unsigned long long)(i - count + 1))
                                               : std::string("inside ");
    return format("%s[%lld] (%s%s%s, %llu element%s)", name, i, where.c_str(), what, name, (unsigned long long)count,
                  count == 1 ? "" : "s");
}

// The element at byte `off` of block B's shared memory (al null: in the array holding it) or of
// allocation al (its buffer, where labelled), in words: what a race's finding names (Finding::where)
// and an unwritten read's message.
std::string element_at(const Block *B, const Alloc *al, size_t off) {
    if (al) {
        if (!al->elem) return format("byte %zu of a device allocation", off);
        uintptr_t ilo, ihi;
        buffer_range(*al, &ilo, &ihi);
        return element_text(al->name, "", ilo, al->count, al->elem, al->base + off);
    }
    uintptr_t a0 = reinterpret_cast<uintptr_t>(B->arena);
    for (const ShArr &a : B->arrays)
        if (off >= a.off && off < a.off + a.bytes)
            return element_text(a.name ? a.name : "extern __shared__", "shared array ", a0 + a.off, a.bytes / a.elem,
                                a.elem, a0 + off);
    return format("byte %zu of the block's shared memory", off);
}

// Shared accesses (plain mode too): inside one of the block's arrays, or out of bounds naming the
// nearest array (red zones keep the arrays apart, so an overrun of one does not land in the next).
void shared_bounds(Fiber *f, Block *B, uintptr_t addr, unsigned size, int kind, uintptr_t pc) {
    size_t off = addr - reinterpret_cast<uintptr_t>(B->arena), best = SIZE_MAX;
    const ShArr *near = nullptr;
    for (const ShArr &a : B->arrays) {
        if (off >= a.off && off + size <= a.off + a.bytes) return;
        size_t d = off < a.off ? a.off - off : off >= a.off + a.bytes ? off - (a.off + a.bytes) : 0;
        if (d < best) best = d, near = &a;
    }
    const char *name = near->name ? near->name : "extern __shared__";
    std::string what = element_text(name, "shared array ", reinterpret_cast<uintptr_t>(B->arena) + near->off,
                                    near->bytes / near->elem, near->elem, addr);
    bad_access(f, Kind::out_of_bounds, pc,
               format("out-of-bounds shared memory %s of %s at {L}%s", access_noun(kind), what.c_str(),
                      near == &B->arrays[0] && near->bytes == 0 ? " (the launch gives no dynamic shared memory)" : ""));
}

}  // namespace sg::rt
