// The runtime, memory level: the atomic operations of CUDA's atomic functions.
#include "memory/access.h"

namespace sg::rt {

// An atomic operation's arguments (do_atomic): the operation (__SG_A_*), signed or floating, its
// width in bytes, its operands (b: a compare-and-swap's new value).
struct AtomicUpdate {
    int op;
    bool sgn, flt;
    int size;
    uint64_t a, b;
};

// The value a floating-point atomic (add, exchange) leaves in place of cur.
static uint64_t apply_float_atomic(const AtomicUpdate &u, uint64_t cur) {
    if (u.size == 4) {
        float x, y;
        uint32_t c32 = uint32_t(cur), a32 = uint32_t(u.a);
        std::memcpy(&x, &c32, 4), std::memcpy(&y, &a32, 4);
        float r = u.op == __SG_A_ADD ? x + y : u.op == __SG_A_EXCH ? y : x;
        uint32_t o;
        std::memcpy(&o, &r, 4);
        return o;
    }
    double x, y;
    std::memcpy(&x, &cur, 8), std::memcpy(&y, &u.a, 8);
    double r = u.op == __SG_A_ADD ? x + y : u.op == __SG_A_EXCH ? y : x;
    uint64_t o;
    std::memcpy(&o, &r, 8);
    return o;
}

// The value an atomic min or max (signed where u says so) leaves in place of cur (m: its width's bits).
static uint64_t apply_min_max(const AtomicUpdate &u, uint64_t cur, uint64_t m) {
    uint64_t a = u.a;
    int64_t sc = u.size == 8 ? int64_t(cur) : int64_t(int32_t(uint32_t(cur)));
    int64_t sa = u.size == 8 ? int64_t(a) : int64_t(int32_t(uint32_t(a)));
    bool less = u.sgn ? sa < sc : a < cur, greater = u.sgn ? sa > sc : a > cur;
    return (u.op == __SG_A_MIN ? less : greater) ? a & m : cur;
}

// The value atomic u leaves in place of cur (its width's bits).
static uint64_t apply_atomic(const AtomicUpdate &u, uint64_t cur) {
    if (u.flt) return apply_float_atomic(u, cur);
    uint64_t m = u.size == 8 ? ~0ull : u.size == 4 ? 0xffffffffull : 0xffffull, a = u.a;
    switch (u.op) {
        case __SG_A_ADD: return (cur + a) & m;
        case __SG_A_SUB: return (cur - a) & m;
        case __SG_A_AND: return cur & a;
        case __SG_A_OR: return cur | a;
        case __SG_A_XOR: return cur ^ a;
        case __SG_A_EXCH: return a & m;
        case __SG_A_CAS: return (cur == (a & m)) ? (u.b & m) : cur;
        case __SG_A_MIN:
        case __SG_A_MAX: return apply_min_max(u, cur, m);
        case __SG_A_INC: return cur >= a ? 0 : cur + 1;
        case __SG_A_DEC: return (cur == 0 || cur > a) ? a : cur - 1;
        default: return cur;
    }
}

// Atomic u on the word of type T at addr, as a compare-and-swap loop; the value before it
// (`changed`: whether it stored another value).
template <class T>
static uint64_t update_word(void *addr, const AtomicUpdate &u, bool *changed) {
    T *p = static_cast<T *>(addr), cur = __atomic_load_n(p, __ATOMIC_SEQ_CST), nv;
    do {
        nv = T(apply_atomic(u, cur));
    } while (nv != cur && !__atomic_compare_exchange_n(p, &cur, nv, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    *changed = nv != cur;
    return cur;
}

uint64_t do_atomic(int opf, void *addr, int size, uint64_t a, uint64_t b, bool *changed) {
    const AtomicUpdate u{opf & 0xff, (opf & __SG_A_SIGNED) != 0, (opf & __SG_A_FLOAT) != 0, size, a, b};
    *changed = false;
    if (size == 8) return update_word<uint64_t>(addr, u, changed);
    if (size == 4) return update_word<uint32_t>(addr, u, changed);
    return update_word<uint16_t>(addr, u, changed);
}

}  // namespace sg::rt
