// The runtime: the memory-access profile.
#include "profile/profile.h"
#include "memory/access.h"

namespace sg::rt {

ProfBlock *prof_block(Block *B) {
    ProfBlock *row = g_prof[B->w->id & 63];
    ProfBlock *free_slot = nullptr;
    for (unsigned i = 0; i < kResident; ++i) {
        ProfBlock &p = row[i];
        if (p.blk == B) {
            if (p.inst != B->inst) p.reset(B, B->inst, B->n);  // a new block (the old one failed)
            return &p;
        }
        if (!p.blk && !free_slot) free_slot = &p;
    }
    if (!free_slot) {  // the worker's slots changed (sg_trim): start over
        for (unsigned i = 0; i < kResident; ++i) row[i].reset(nullptr, 0, 0);
        free_slot = &row[0];
    }
    free_slot->reset(B, B->inst, B->n);
    return free_slot;
}

// The words (4-byte) one phase of lanes touches; returns the phase's wavefronts.
unsigned prof_phase(const uintptr_t *words, unsigned nwords) {
    // Fast path: every bank holds at most one distinct word (conflict-free or broadcast).
    uintptr_t first[32];
    bool used[32] = {false};
    bool simple = true;
    for (unsigned i = 0; i < nwords && simple; ++i) {
        unsigned b = unsigned(words[i] & 31);
        if (!used[b])
            used[b] = true, first[b] = words[i];
        else if (first[b] != words[i])
            simple = false;
    }
    if (simple) return nwords ? 1 : 0;
    uintptr_t w[128];
    std::memcpy(w, words, nwords * sizeof(uintptr_t));
    std::sort(w, w + nwords);
    unsigned per_bank[32] = {0};
    unsigned worst = 0;
    for (unsigned i = 0; i < nwords; ++i) {
        if (i && w[i] == w[i - 1]) continue;  // same word: broadcast
        unsigned c = ++per_bank[w[i] & 31];
        worst = std::max(worst, c);
    }
    return worst;
}

void prof_close(ProfPc &pc, const ProfRec &r) {
    ProfStats &st = pc.st;
    unsigned size = st.size;
    unsigned active = unsigned(__builtin_popcount(r.mask));
    if (!active) return;
    ++st.requests;
    if (st.space == 'g') {
        uintptr_t sec[64];
        unsigned ns = 0;
        for (unsigned l = 0; l < 32; ++l) {
            if (!(r.mask >> l & 1)) continue;
            uintptr_t lo = r.addr[l] >> 5, hi = (r.addr[l] + size - 1) >> 5;
            for (uintptr_t s = lo; s <= hi && ns < 64; ++s) sec[ns++] = s;
        }
        bool ascending = true;
        for (unsigned i = 1; i < ns && ascending; ++i) ascending = sec[i] >= sec[i - 1];
        if (!ascending) std::sort(sec, sec + ns);  // lanes usually go up: no sort needed
        st.sectors += uint64_t(std::unique(sec, sec + ns) - sec);
        st.ideal_sectors += (uint64_t(active) * size + 31) / 32;
        st.bytes += uint64_t(active) * size;
        return;
    }
    unsigned words_per_lane = size <= 4 ? 1 : size / 4;
    unsigned lanes_per_phase = 32 / words_per_lane;
    unsigned degree = 0;
    for (unsigned p0 = 0; p0 < 32; p0 += lanes_per_phase) {
        uintptr_t words[128];
        unsigned nw = 0;
        for (unsigned l = p0; l < p0 + lanes_per_phase; ++l) {
            if (!(r.mask >> l & 1)) continue;
            for (unsigned k = 0; k < words_per_lane; ++k) words[nw++] = (r.addr[l] >> 2) + k;
        }
        if (!nw) continue;
        unsigned wf = prof_phase(words, nw);
        st.wavefronts += wf;
        st.ideal += 1;
        degree = std::max(degree, wf);
    }
    if (degree > st.worst_degree) {
        st.worst_degree = degree;
        st.worst_mask = r.mask;
        std::memcpy(st.worst_addr, r.addr, sizeof st.worst_addr);
        int first = -1;
        st.worst_stride = 0;
        for (int l = 0; l < 32; ++l) {
            if (!(r.mask >> l & 1)) continue;
            if (first < 0) {
                first = l;
                continue;
            }
            st.worst_stride = (int64_t(r.addr[l]) - int64_t(r.addr[first])) / (l - first);
            break;
        }
    }
}

// The worst request's lanes as 4-byte word numbers, comma-separated, `-` for an inactive lane: each
// lane's word less the lowest word's 32-word row (w - (lowest & ~31)), so that a word's bank is its
// number mod 32 and two lanes of one number read one word (a broadcast); "" without a request.
std::string worst_words(const ProfStats &s) {
    if (!s.worst_mask) return "";
    uintptr_t low = ~uintptr_t(0);
    for (unsigned l = 0; l < 32; ++l)
        if (s.worst_mask >> l & 1) low = std::min(low, s.worst_addr[l] >> 2);
    std::string out;
    for (unsigned l = 0; l < 32; ++l) {
        if (l) out += ',';
        out += s.worst_mask >> l & 1 ? format("%llu", (unsigned long long)((s.worst_addr[l] >> 2) - (low & ~uintptr_t(31))))
                                     : std::string("-");
    }
    return out;
}

// Closes every open request of the block (a barrier, the block's end) and restarts the counters.
void prof_flush(ProfBlock *P) {
    P->open_records = 0;
    for (auto &kv : P->pcs) {
        ProfPc &pc = kv.second;
        for (auto &warp : pc.open) {
            for (ProfRec &r : warp)
                if (r.mask) prof_close(pc, r);
            if (warp.capacity() > 64)
                std::vector<ProfRec>().swap(warp);  // a long loop's records: give the memory back
            else
                warp.clear();  // keeps its capacity for the next barrier interval
        }
        std::fill(pc.count.begin(), pc.count.end(), 0u);
    }
}

// A memory operation of the running thread at addr: a step unless on its own stack (its locals and
// its threadIdx/blockIdx header, which a GPU keeps in registers); that block's state (null: the
// block is not profiled, or the step is a poll's repeat: see "A poll's repeat" above). load: the
// operation is a volatile load (a plain load, a store or an atomic always counts).
ProfBlock *profile_step(Fiber *f, uintptr_t addr, int load) {
    Block *B = f->blk;
    if (g_profile_max_blocks && B->linear >= g_profile_max_blocks) return nullptr;
    ProfBlock *P = prof_block(B);
    bool own_stack = ((addr ^ reinterpret_cast<uintptr_t>(f->hdr)) & ~(kStack - 1)) == 0;
    if (own_stack || f->linear >= P->steps.size()) return P;
    uintptr_t &last = P->last_load[f->linear];
    if (load && last == addr) return nullptr;  // a poll's repeat
    last = load ? addr : 0;
    ++P->steps[f->linear];
    return P;
}

// poll: a volatile load, which may be a poll's repeat (see "A poll's repeat" above).
void profile_access(uintptr_t addr, unsigned size, int write, uintptr_t pc, int poll) {
    Fiber *f = current_fiber();
    Block *B = f->blk;
    ProfBlock *P = profile_step(f, addr, !write && poll);
    if (!P) return;
    unsigned char space;
    uintptr_t a0 = reinterpret_cast<uintptr_t>(B->arena);
    if (addr - a0 < B->arena_map_len) {
        space = 's';
    } else {
        auto it = std::upper_bound(g_profile_allocs.begin(), g_profile_allocs.end(), std::make_pair(addr, ~uintptr_t(0)));
        if (it == g_profile_allocs.begin()) return;
        --it;
        if (addr - it->first >= it->second) return;  // a local or module variable: not counted
        space = 'g';
    }
    uint32_t off = uint32_t(pc - g_module_base - 1);
    ProfPc &st = P->at(off);
    if (st.count.empty()) {
        st.count.assign(P->n, 0u);
        st.open.resize((P->n + 31) / 32);
        st.st.space = space, st.st.write = (unsigned char)write, st.st.size = (unsigned char)size;
    }
    unsigned lane = f->linear & 31, warp = f->linear >> 5;
    uint32_t k = st.count[f->linear]++;
    std::vector<ProfRec> &recs = st.open[warp];
    if (k >= recs.size()) {
        if (P->open_records >= kMaxOpenRecords) {
            prof_flush(P);  // as if at a barrier (see kMaxOpenRecords)
            k = st.count[f->linear]++;
        }
        P->open_records += k + 1 - recs.size();
        recs.resize(k + 1);
    }
    ProfRec &r = recs[k];
    r.mask |= 1u << lane;
    r.addr[lane] = addr;
    unsigned lanes = std::min(32u, P->n - (warp << 5));
    uint32_t full = lanes == 32 ? ~0u : (1u << lanes) - 1;
    if (r.mask == full) {
        prof_close(st, r);
        r.mask = 0;  // closed; k is not reached again before the counters restart
    }
}

void profile_barrier(Block *B) {
    if (g_profile_max_blocks && B->linear >= g_profile_max_blocks) return;
    ProfBlock *P = prof_block(B);  // made here when the block has not touched memory yet
    ++P->barriers;
    prof_flush(P);
}

// The block finished: close its requests and add its counts to the totals.
void profile_block_end(Block *B) {
    if (g_profile_max_blocks && B->linear >= g_profile_max_blocks) return;
    for (ProfBlock &p : g_prof[B->w->id & 63]) {
        if (p.blk != B || p.inst != B->inst) continue;
        prof_flush(&p);
        std::lock_guard<std::mutex> lock(g_profile_mu);
        uint64_t span = 0, work = 0;
        for (uint64_t s : p.steps) span = std::max(span, s), work += s;
        ProfSteps &ls = g_profile_launch;
        ls.span = std::max(ls.span, span), ls.work += work, ls.barriers = std::max(ls.barriers, p.barriers);
        ++ls.blocks;
        for (auto &kv : p.pcs) {
            const ProfStats &s = kv.second.st;
            ProfStats &t = g_profile_totals.emplace(std::make_pair(std::string(g_profile_kernel), kv.first),
                                                   ProfStats()).first->second;
            if (!t.space) t.space = s.space, t.write = s.write, t.size = s.size;
            t.requests += s.requests, t.wavefronts += s.wavefronts, t.ideal += s.ideal;
            t.sectors += s.sectors, t.ideal_sectors += s.ideal_sectors, t.bytes += s.bytes;
            if (s.worst_degree > t.worst_degree) {
                t.worst_degree = s.worst_degree, t.worst_stride = s.worst_stride, t.worst_mask = s.worst_mask;
                std::memcpy(t.worst_addr, s.worst_addr, sizeof t.worst_addr);
            }
        }
        p.reset(B, 0, 0);
    }
}

void profile_launch_begin(const Launch *L, const sg_launch_config *cfg) {
    g_profile = g_profile_on;
    if (!g_profile) return;
    g_profile_kernel = L->kernel->name;
    {
        std::lock_guard<std::mutex> lock(g_profile_mu);
        g_profile_launch = ProfSteps();
        g_profile_launch.kernel = g_profile_kernel;
    }
    g_profile_allocs.clear();
    for (int i = 0; i < cfg->nallocs; ++i)
        g_profile_allocs.emplace_back(uintptr_t(cfg->allocs[i].base), uintptr_t(cfg->allocs[i].size));
    std::sort(g_profile_allocs.begin(), g_profile_allocs.end());
}

void profile_launch_end() {
    if (g_profile) {
        std::lock_guard<std::mutex> lock(g_profile_mu);
        if (g_profile_launches.size() < 4096) g_profile_launches.push_back(g_profile_launch);  // bounds the text
    }
    g_profile = 0;
}

}  // namespace sg::rt

using namespace sg::rt;

// Turns the profile on (max_blocks: profile blocks 0 .. max_blocks - 1 of each launch; 0: all) or
// off for the next launches. Totals are kept until sg_profile_take.
SG_EXPORT void sg_profile_set(int on, unsigned long long max_blocks) {
    sg::rt::g_profile_on = on != 0;
    sg::rt::g_profile_max_blocks = max_blocks;
}

// The profile totals since the last call, tab-separated: first one line per launch, in launch
// order: `=`, kernel, span, work, barriers, profiled blocks (see "Steps" above); then one line per
// (kernel, program point): kernel, @pc offset, space (s|g), w (1 store, 0 load), size, requests,
// wavefronts, ideal wavefronts, worst degree, worst stride (bytes), sectors, ideal sectors, bytes
// (global: active lanes times the size, summed over requests), and the worst request's lanes (shared;
// worst_words: 32 comma-separated 4-byte word numbers, `-` for an inactive lane, or empty). Returns
// the text's length (copies at most cap - 1 bytes, NUL-terminated); the totals are cleared.
SG_EXPORT long sg_profile_take(char *buf, long cap) {
    std::string text;
    {
        std::lock_guard<std::mutex> lock(sg::rt::g_profile_mu);
        for (const sg::rt::ProfSteps &l : sg::rt::g_profile_launches)  // first: a long list of pcs cannot cut them off
            text += sg::rt::format("=\t%s\t%llu\t%llu\t%llu\t%llu\n", l.kernel.c_str(), (unsigned long long)l.span,
                               (unsigned long long)l.work, (unsigned long long)l.barriers,
                               (unsigned long long)l.blocks);
        sg::rt::g_profile_launches.clear();
        for (auto &kv : sg::rt::g_profile_totals) {
            const sg::rt::ProfStats &s = kv.second;
            text += sg::rt::format("%s\t@%x\t%c\t%d\t%u\t%llu\t%llu\t%llu\t%u\t%lld\t%llu\t%llu\t%llu\t%s\n", kv.first.first.c_str(),
                               kv.first.second, s.space, int(s.write), unsigned(s.size),
                               (unsigned long long)s.requests, (unsigned long long)s.wavefronts,
                               (unsigned long long)s.ideal, s.worst_degree, (long long)s.worst_stride,
                               (unsigned long long)s.sectors, (unsigned long long)s.ideal_sectors,
                               (unsigned long long)s.bytes, sg::rt::worst_words(s).c_str());
        }
        sg::rt::g_profile_totals.clear();
    }
    size_t n = std::min(text.size(), size_t(cap > 0 ? cap - 1 : 0));
    if (cap > 0) {
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
    }
    return long(text.size());
}
