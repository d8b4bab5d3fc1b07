// The runtime: the sg_* C ABI for the executor (sg_host.h).
#include "grid/launch.h"
#include "grid/faults.h"
#include "grid/output.h"
#include "block/rounds.h"
#include "checks/findings.h"
#include "memory/access.h"
#include "profile/profile.h"

using namespace sg::rt;

// ---------------------------------------------------------------------------------------------
// The C ABI for Python. Everything here that is not SG_EXPORT is static: no name of the runtime's
// state can be bound by a module's code (lockdown.py audits what a module defines and refers to).
// ---------------------------------------------------------------------------------------------
SG_EXPORT int sg_abi_version(void) { return SG_ABI_VERSION; }

SG_EXPORT int sg_kernel_count(void) { return g_nkernels; }

SG_EXPORT const char *sg_kernel_name(int i) { return i >= 0 && i < g_nkernels ? g_kernels[i].name : nullptr; }

// 1: defined; 0: declared by the contract but not defined; -1: unknown name.
SG_EXPORT int sg_kernel_defined(const char *name) {
    const Kernel *k = find_kernel(name);
    return k ? (k->fn != nullptr) : -1;
}

SG_EXPORT int sg_kernel_arity(const char *name) {
    const Kernel *k = find_kernel(name);
    return k ? k->nargs : -1;
}

// Frees every worker's fiber stacks and arenas (they are re-created by the next launch).
SG_EXPORT void sg_trim(void) {
    std::lock_guard<std::mutex> lock(g_launch_mu);
    g_workers.clear();
}

// Device printf output since the last call (at most cap - 1 bytes, NUL-terminated); returns its
// length, or -1 - length when output was cut at the cap.
SG_EXPORT long sg_take_output(char *buf, long cap) {
    std::lock_guard<std::mutex> lock(g_out_mu);
    size_t n = std::min(g_out.size(), size_t(cap > 0 ? cap - 1 : 0));
    std::memcpy(buf, g_out.data(), n);
    buf[n] = '\0';
    bool cut = g_out_cut;
    g_out.clear();
    g_out_cut = false;
    return cut ? -1 - long(n) : long(n);
}

// The findings of the last launch, one a line, tab-separated:
// kind, loc, other, block, thread, other block, other thread, has_other, block_linear, access (a race's
// kind: read-after-write...), where (a race's element), message.
static std::string g_findings_text;
SG_EXPORT long sg_findings(char *buf, long cap) {
    size_t n = std::min(g_findings_text.size(), size_t(cap > 0 ? cap - 1 : 0));
    std::memcpy(buf, g_findings_text.data(), n);
    buf[n] = '\0';
    return long(g_findings_text.size());
}

static int find_segments(struct dl_phdr_info *info, size_t, void *) {
    uintptr_t probe = reinterpret_cast<uintptr_t>(&g_kernels);
    std::vector<std::pair<uintptr_t, uintptr_t>> segs;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        segs.emplace_back(lo, hi);
        if (probe >= lo && probe < hi) mine = true;
    }
    if (!mine) return 0;
    g_segments = segs;
    g_module_base = info->dlpi_addr;
    return 1;
}

// The executor's threads (see sg_thread_pool in sg_host.h), or null: the runtime starts its own.
static const sg_thread_pool *g_pool = nullptr;

SG_EXPORT void sg_set_thread_pool(const sg_thread_pool *pool) { g_pool = pool; }

static void run_pooled_worker(void *worker) {
    Worker *w = static_cast<Worker *>(worker);
    w->run(w->launch);
}

// The launch that `cfg` asks for of kernel k, its configuration checked; null (res says why) where
// it is invalid.
static Launch *configured_launch(const sg_launch_config *cfg, const Kernel *k, sg_result *res) {
    std::unique_ptr<Launch> L(new Launch());
    L->kernel = k;
    L->grid = dim3(cfg->grid[0], cfg->grid[1], cfg->grid[2]);
    L->block = dim3(cfg->block[0], cfg->block[1], cfg->block[2]);
    L->nblocks = uint64_t(L->grid.x) * L->grid.y * L->grid.z;
    uint64_t nthreads = uint64_t(L->block.x) * L->block.y * L->block.z;
    L->dyn_shared = size_t(cfg->dyn_shared);
    L->shared_limit = size_t(cfg->shared_limit);
    L->schedule = cfg->schedule;
    L->seed = cfg->seed;
    L->checks = cfg->checks != 0;
    L->detect_deadlock = cfg->detect_deadlock != 0;
    L->shared_fill = cfg->shared_fill;
    L->interleave = cfg->interleave;
    L->sample_mode = cfg->sample_mode;
    for (int i = 0; i < cfg->nsample && i < SG_MAX_SAMPLE; ++i)
        if (cfg->sample[i] < L->nblocks) L->sample.push_back(cfg->sample[i]);
    std::sort(L->sample.begin(), L->sample.end());
    if (L->nblocks == 0 || nthreads == 0 || nthreads > kMaxThreads) {
        set_launch_error(res, "configuration",
                         format("invalid launch of `%s`: %llu blocks of %llu threads", cfg->kernel,
                                (unsigned long long)L->nblocks, (unsigned long long)nthreads));
        return nullptr;
    }
    L->nthreads = unsigned(nthreads);
    if (L->dyn_shared > L->shared_limit) {
        set_kernel_error(res, Kind::shared_memory_limit,
                         format("launch of `%s`: %zu bytes of dynamic shared memory exceed the limit of %zu bytes",
                                cfg->kernel, L->dyn_shared, L->shared_limit));
        return nullptr;
    }
    if (cfg->sample_mode < 0 || cfg->sample_mode > 2 || (cfg->sample_mode != 0 && L->sample.empty())) {
        set_launch_error(res, "configuration",
                         format("sample mode %d with %d sampled blocks", cfg->sample_mode, cfg->nsample));
        return nullptr;
    }
    if (cfg->schedule < 0 || cfg->schedule >= kScheduleCount) {
        set_launch_error(res, "configuration", format("unknown schedule %d", cfg->schedule));
        return nullptr;
    }
    return L.release();
}

// The launch's numbers of block instances (Launch::inst_base): apart from every earlier launch's,
// so that a record of an access from an earlier launch is never taken for one of this launch.
static void number_block_instances(Launch *L) {
    static uint32_t next_inst = 1;
    if (uint64_t(next_inst) + L->nblocks >= 0xF0000000ull) next_inst = 1;  // wrap: rare, loses nothing
    L->inst_base = next_inst;
    next_inst += uint32_t(L->nblocks) + 1;
}

// Checks on: the launch's device allocations (sorted by base), each with its shadow (race records,
// one Cell a word) and its records of last stores (one Pub a word), mapped on demand; `shadows`
// gets the mappings to unmap after the launch.
static void track_allocations(Launch *L, const sg_launch_config *cfg, std::vector<std::pair<void *, size_t>> &shadows) {
    for (int i = 0; i < cfg->nallocs; ++i) {
        const sg_alloc &c = cfg->allocs[i];
        Alloc a{uintptr_t(c.base), uintptr_t(c.size), nullptr, 0, nullptr, c.lo, c.count, c.elem, {0}};
        std::memcpy(a.name, c.name, sizeof a.name - 1);
        if (a.elem && (a.lo + a.count) * a.elem > a.size) a.elem = 0;  // a label that does not fit: ignored
        size_t cells = (a.size + 3) / 4 * sizeof(Cell), len = cells + (a.size + 3) / 4 * sizeof(Pub);
        if (cells) {
            void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m != MAP_FAILED) {
                a.shadow = static_cast<Cell *>(m), a.shadow_len = cells, shadows.emplace_back(m, len);
                a.pub = reinterpret_cast<Pub *>(static_cast<char *>(m) + cells);
            }
        }
        L->allocs.push_back(a);
    }
    std::sort(L->allocs.begin(), L->allocs.end(), [](const Alloc &x, const Alloc &y) { return x.base < y.base; });
}

// The launch's workers: as many as asked, at most one a block and 64 (made on first use, kept).
static void assign_workers(Launch *L, int asked) {
    uint64_t want = std::max(1, asked);
    unsigned nworkers = unsigned(std::min<uint64_t>(std::min<uint64_t>(want, L->nblocks), 64));
    while (g_workers.size() < nworkers) {
        g_workers.emplace_back(new Worker());
        g_workers.back()->id = unsigned(g_workers.size() - 1);
    }
    L->nworkers = nworkers;
    for (unsigned i = 0; i < nworkers; ++i) {
        Worker *w = g_workers[i].get();
        w->launch = L;
        w->idle.store(false);
        w->stuck.store(0);
        w->progress.store(0);
        L->workers[i] = w;
    }
}

// Runs the launch's workers to the end: worker 0 on this thread, the others on the executor's pool
// (its threads, made before the seccomp filter went on) or on threads of their own; a worker
// without a thread is idle, and the others take its blocks.
static void run_workers(Launch *L) {
    const unsigned nworkers = L->nworkers;
    std::vector<std::thread> threads;
    std::vector<void *> pooled;
    for (unsigned i = 1; g_pool && i < nworkers; ++i) pooled.push_back(g_workers[i].get());
    int started = pooled.empty() ? 0 : std::max(0, g_pool->start(&run_pooled_worker, pooled.data(), int(pooled.size())));
    for (unsigned i = 1 + unsigned(started); g_pool && i < nworkers; ++i) g_workers[i]->idle.store(true);
    for (unsigned i = 1; !g_pool && i < nworkers; ++i) {
        try {
            Worker *w = g_workers[i].get();
            threads.emplace_back([w, L] { w->run(L); });
        } catch (const std::exception &) {
            g_workers[i]->idle.store(true);  // fewer OS threads: the others take the remaining blocks
        }
    }
    g_workers[0]->run(L);
    if (started) g_pool->wait();
    for (std::thread &t : threads) t.join();
}

// The launch's findings as sg_findings gives them: ordered by block, then by discovery.
static void write_findings_text(Launch *L) {
    std::sort(L->findings.begin(), L->findings.end(), [](const Finding &a, const Finding &b) {
        return a.block_linear != b.block_linear ? a.block_linear < b.block_linear : a.seq < b.seq;
    });
    g_findings_text.clear();
    for (const Finding &fd : L->findings) {
        g_findings_text += format("%s\t%s\t%s\t%u,%u,%u\t%u,%u,%u\t%u,%u,%u\t%u,%u,%u\t%d\t%llu\t", kind_name(fd.kind),
                                  fd.loc, fd.other, fd.block.x, fd.block.y, fd.block.z,
                                  fd.thread.x, fd.thread.y, fd.thread.z,
                                  fd.oblock.x, fd.oblock.y, fd.oblock.z, fd.othread.x, fd.othread.y, fd.othread.z,
                                  fd.has_other, (unsigned long long)fd.block_linear);
        for (const char *text : {fd.access, fd.where, fd.msg}) {
            std::string m(text);
            for (char &c : m)
                if (c == '\n' || c == '\t') c = ' ';
            g_findings_text += m + (text == fd.msg ? "\n" : "\t");
        }
    }
}

// The launch's failure (its lowest failing block's) into res, with the failing thread's ids.
static void set_launch_failure(Launch *L, sg_result *res) {
    ErrorRecord &e = L->error;
    std::string msg(e.message);
    if (e.has_ids)
        msg += format(" (block (%u, %u, %u), thread (%u, %u, %u))", e.block.x, e.block.y, e.block.z, e.thread.x,
                      e.thread.y, e.thread.z);
    set_kernel_error(res, e.kind, msg);
    res->nfindings = int(L->findings.size());
    if (!e.has_ids) return;
    res->has_ids = 1;
    res->block[0] = e.block.x, res->block[1] = e.block.y, res->block[2] = e.block.z;
    res->thread[0] = e.thread.x, res->thread[1] = e.thread.y, res->thread[2] = e.thread.z;
}

SG_EXPORT int sg_launch(const sg_launch_config *cfg, void *const *args, int nargs, sg_result *res) {
    std::memset(res, 0, sizeof *res);
    const Kernel *k = find_kernel(cfg->kernel);
    if (!k || !k->fn) {
        set_launch_error(res, "unknown-kernel", format("the module has no kernel `%s`", cfg->kernel));
        return res->status;
    }
    if (nargs != k->nargs) {
        set_launch_error(res, "arguments",
                         format("kernel `%s` takes %d arguments, got %d", cfg->kernel, k->nargs, nargs));
        return res->status;
    }
    std::unique_ptr<Launch> L(configured_launch(cfg, k, res));
    if (!L) return res->status;
    L->args = args;

    std::lock_guard<std::mutex> lock(g_launch_mu);
    number_block_instances(L.get());
    if (!g_module_base) dl_iterate_phdr(&find_segments, nullptr);
    std::vector<std::pair<void *, size_t>> shadows;
    if (L->checks) track_allocations(L.get(), cfg, shadows);
    assign_workers(L.get(), cfg->workers);

    install_fault_handlers();
    profile_launch_begin(L.get(), cfg);
    g_active.store(1);
    run_workers(L.get());
    g_active.store(0);
    profile_launch_end();
    remove_fault_handlers();
    for (auto &s : shadows) munmap(s.first, s.second);
    for (unsigned i = 0; i < L->nworkers; ++i)
        for (auto &s : g_workers[i]->slots)
            if (s) s->busy = false;

    write_findings_text(L.get());
    res->nfindings = int(L->findings.size());
    if (L->error.set) {
        set_launch_failure(L.get(), res);
        return res->status;
    }
    return SG_OK;
}
