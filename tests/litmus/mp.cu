// Litmus family MP: message passing. Tests: mp_{plain,volatile,atomic}_{fence_both,fence_writer,
// fence_reader,no_fence}, mp_fence_block_both, mp_fence_block_writer, mp_fence_gpu_sys,
// mp_warps_fence_block, mp_release_acquire, mp_relaxed_builtin, mp_release_relaxed,
// mp_shared_{fence_both,fence_writer,no_fence} (D and F in shared memory, two warps of one block).
// Shape: a writer stores the data D = 1, [fences,] then the flag F = 1; a reader waits for F == 1,
// [fences,] then loads D into RES(0). Writer and reader are thread 0 of blocks 0 and 1 (grid 2,
// block 1), or, in mp_warps_fence_block, threads 0 and 32 of one block (two warps; grid 1, block 64).
// The model's question: may RES(0) be 0? Each kernel's comment gives its source and verdict.
// Sources: herdtools7 catalogue/ptx/tests/mp.litmus, mp+membar.gls.litmus, mp+membar.ctas.litmus
// (commit 3753fa29f; Alglave et al., ASPLOS 2015), catalogue/tutorial/tests/mp-mit-scopes*.litmus;
// Lustig et al., ASPLOS 2019, Figure 5 and section 3.4.1; PTX ISA "Memory Consistency Model",
// release and acquire patterns (8.7), causality order (8.8.5), data races (8.6.1).

enum Data { PLAIN, VOLATILE };
enum Flag { VOL_FLAG, CUDA_ATOMIC, RELAXED, RELEASE_ACQUIRE, RELEASE_RELAXED };
enum Fence { NONE, CTA, GPU, SYS };

template <int SCOPE>
__device__ void fence() {
    if (SCOPE == CTA) __threadfence_block();
    if (SCOPE == GPU) __threadfence();
    if (SCOPE == SYS) __threadfence_system();
}

template <int DATA, int FLAG, int WRITER_FENCE, int READER_FENCE, bool WARPS = false>
__device__ void mp(int* out) {
    const bool writer = WARPS ? blockIdx.x == 0 && threadIdx.x == 0 : ROLE(0);
    const bool reader = WARPS ? blockIdx.x == 0 && threadIdx.x == 32 : ROLE(1);
    if (writer) {
        if (DATA == PLAIN) out[D] = 1;  // LINE:mp_data_store
        if (DATA == VOLATILE) VOL(D) = 1;  // LINE:mp_vdata_store
        fence<WRITER_FENCE>();
        if (FLAG == VOL_FLAG) VOL(F) = 1;
        if (FLAG == CUDA_ATOMIC) atomicExch(AT(F), 1);
        if (FLAG == RELAXED) __atomic_store_n(AT(F), 1, __ATOMIC_RELAXED);
        if (FLAG == RELEASE_ACQUIRE || FLAG == RELEASE_RELAXED) __atomic_store_n(AT(F), 1, __ATOMIC_RELEASE);
    } else if (reader) {
        if (FLAG == VOL_FLAG) while (VOL(F) == 0) {}
        if (FLAG == CUDA_ATOMIC) while (atomicAdd(AT(F), 0) == 0) {}
        if (FLAG == RELAXED || FLAG == RELEASE_RELAXED) while (__atomic_load_n(AT(F), __ATOMIC_RELAXED) == 0) {}
        if (FLAG == RELEASE_ACQUIRE) while (__atomic_load_n(AT(F), __ATOMIC_ACQUIRE) == 0) {}
        fence<READER_FENCE>();
        if (DATA == PLAIN) RES(0) = out[D];  // LINE:mp_data_load
        if (DATA == VOLATILE) RES(0) = VOL(D);  // LINE:mp_vdata_load
    }
}

// mp_plain_fence_both. Source: herdtools7 catalogue/ptx/tests/mp+membar.gls.litmus (3753fa29f) and
// catalogue/tutorial/tests/mp-mit-scopes+fgpus.litmus; __threadfence() is membar.gl = fence.sc.gpu.
// Verdict: clean. Writer fence then a strong (volatile) flag store is a release pattern, the strong
// flag load then a fence an acquire pattern; they synchronize, so D's plain store precedes its plain
// load in causality order: no data race, and RES(0) = 0 is forbidden.
extern "C" __global__ void mp_plain_fence_both(int* out, int n) { mp<PLAIN, VOL_FLAG, GPU, GPU>(out); }

// mp_plain_fence_writer. Source: herdtools7 catalogue/ptx/tests/mp.litmus with the writer's
// membar.gl only. Verdict: race. The reader has no acquire pattern: D's plain store and plain load
// conflict, are not morally strong and are not ordered by causality (a data race); RES(0) = 0 allowed.
extern "C" __global__ void mp_plain_fence_writer(int* out, int n) { mp<PLAIN, VOL_FLAG, GPU, NONE>(out); }

// mp_plain_fence_reader. Source: herdtools7 catalogue/ptx/tests/mp.litmus with the reader's
// membar.gl only. Verdict: race. No release pattern on the writer's side: a data race on D.
extern "C" __global__ void mp_plain_fence_reader(int* out, int n) { mp<PLAIN, VOL_FLAG, NONE, GPU>(out); }

// mp_plain_no_fence. Source: herdtools7 catalogue/ptx/tests/mp.litmus (3753fa29f);
// catalogue/tutorial/tests/mp-mit-scopes.litmus. Verdict: race: nothing synchronizes, a data race on D.
extern "C" __global__ void mp_plain_no_fence(int* out, int n) { mp<PLAIN, VOL_FLAG, NONE, NONE>(out); }

// mp_volatile_fence_both. Source: as mp_plain_fence_both, the data volatile too. Verdict: clean
// (release and acquire patterns synchronize; RES(0) = 0 is forbidden by the Causality axiom).
extern "C" __global__ void mp_volatile_fence_both(int* out, int n) { mp<VOLATILE, VOL_FLAG, GPU, GPU>(out); }

// mp_volatile_fence_writer. Source: herdtools7 catalogue/ptx/tests/mp.litmus, strong accesses and the
// writer's fence only. Verdict: race. Every access is strong (no data race), but with no acquire the
// model allows RES(0) = 0 after the flag was seen: a stale read that changes the output (the
// grader's second criterion, /work/shared/design/MEMORY_MODEL.md).
extern "C" __global__ void mp_volatile_fence_writer(int* out, int n) { mp<VOLATILE, VOL_FLAG, GPU, NONE>(out); }

// mp_volatile_fence_reader. Source: as mp_volatile_fence_writer, the reader's fence only.
// Verdict: race (no release: RES(0) = 0 allowed, a stale read that changes the output).
extern "C" __global__ void mp_volatile_fence_reader(int* out, int n) { mp<VOLATILE, VOL_FLAG, NONE, GPU>(out); }

// mp_volatile_no_fence. Source: herdtools7 catalogue/ptx/tests/mp.litmus with volatile (relaxed.sys)
// accesses. Verdict: race: a volatile value and a volatile flag with no fence; RES(0) = 0 allowed.
extern "C" __global__ void mp_volatile_no_fence(int* out, int n) { mp<VOLATILE, VOL_FLAG, NONE, NONE>(out); }

// mp_atomic_fence_both. Source: Merrill & Garland 2016 section 4 (flag published by an atomic after a
// fence, polled, then a fence); PTX 8.7 (a fence then a strong write: release pattern; a strong read
// then a fence: acquire pattern). Verdict: clean.
extern "C" __global__ void mp_atomic_fence_both(int* out, int n) { mp<PLAIN, CUDA_ATOMIC, GPU, GPU>(out); }

// mp_atomic_fence_writer. Source: as mp_atomic_fence_both, no fence after the poll. Verdict: race:
// a CUDA atomic is relaxed, so atomicAdd(&F, 0) acquires nothing; a data race on D.
extern "C" __global__ void mp_atomic_fence_writer(int* out, int n) { mp<PLAIN, CUDA_ATOMIC, GPU, NONE>(out); }

// mp_atomic_fence_reader. Source: as mp_atomic_fence_both, no fence before atomicExch. Verdict: race:
// atomicExch is relaxed, no release; a data race on D.
extern "C" __global__ void mp_atomic_fence_reader(int* out, int n) { mp<PLAIN, CUDA_ATOMIC, NONE, GPU>(out); }

// mp_atomic_no_fence. Source: as mp_atomic_fence_both, no fences. Verdict: race (relaxed atomics
// order nothing; a data race on D).
extern "C" __global__ void mp_atomic_no_fence(int* out, int n) { mp<PLAIN, CUDA_ATOMIC, NONE, NONE>(out); }

// mp_fence_block_both. Source: herdtools7 catalogue/ptx/tests/mp+membar.ctas.litmus (3753fa29f).
// Verdict: race. __threadfence_block() is fence.cta: its scope does not hold the other block's
// thread, so the two fences are not morally strong and do not synchronize: a data race on D.
extern "C" __global__ void mp_fence_block_both(int* out, int n) { mp<PLAIN, VOL_FLAG, CTA, CTA>(out); }

// mp_fence_block_writer. Source: herdtools7 catalogue/tutorial/tests/mp-mit-scopes+fcta+fgpu.litmus.
// Verdict: race: the writer's fence.cta and the reader's fence.sc.gpu are not morally strong (the
// writer's scope does not hold the reader): no synchronization, a data race on D.
extern "C" __global__ void mp_fence_block_writer(int* out, int n) { mp<PLAIN, VOL_FLAG, CTA, GPU>(out); }

// mp_fence_gpu_sys. Source: herdtools7 catalogue/tutorial/tests/mp-mit-scopes+fgpu+fsys.litmus.
// Verdict: clean: __threadfence() (gpu) and __threadfence_system() (sys) both hold both threads.
extern "C" __global__ void mp_fence_gpu_sys(int* out, int n) { mp<PLAIN, VOL_FLAG, GPU, SYS>(out); }

// mp_warps_fence_block. Source: herdtools7 catalogue/ptx/tests/mp+membar.ctas.litmus with both
// threads in one CTA (its scope tree puts them in two; here one block, two warps: threads 0 and 32).
// Verdict: clean: fence.cta holds both threads of the block, so fence + volatile flag store and
// volatile flag load + fence synchronize; no data race on D, RES(0) = 0 forbidden.
extern "C" __global__ void mp_warps_fence_block(int* out, int n) { mp<PLAIN, VOL_FLAG, CTA, CTA, true>(out); }

// mp_release_acquire. Source: Lustig et al. 2019, Figure 5 (st.release.gpu / ld.acquire.gpu);
// PTX 8.7. __atomic_store_n(RELEASE) / __atomic_load_n(ACQUIRE) as cuda::atomic_ref compiles them.
// Verdict: clean: the release and the acquire synchronize; RES(0) = 0 is forbidden.
extern "C" __global__ void mp_release_acquire(int* out, int n) { mp<PLAIN, RELEASE_ACQUIRE, NONE, NONE>(out); }

// mp_relaxed_builtin. Source: Lustig et al. 2019, Figure 5 with both flag accesses relaxed.
// Verdict: race: relaxed accesses form no release or acquire pattern; a data race on D.
extern "C" __global__ void mp_relaxed_builtin(int* out, int n) { mp<PLAIN, RELAXED, NONE, NONE>(out); }

// mp_release_relaxed. Source: Lustig et al. 2019, Figure 5 with the reader's load relaxed.
// Verdict: race: a release with no acquire on the reader's side; a data race on D.
extern "C" __global__ void mp_release_relaxed(int* out, int n) { mp<PLAIN, RELEASE_RELAXED, NONE, NONE>(out); }

// Message passing through shared memory between two warps of one block (threads 0 and 32; grid 1,
// block 64): D and F are __shared__ (F volatile), set to 0 before a barrier.
template <int WRITER_FENCE, int READER_FENCE>
__device__ void mp_shared(int* out) {
    __shared__ int d;
    __shared__ volatile int f;
    if (threadIdx.x == 0) d = 0, f = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        d = 1;  // LINE:mps_data_store
        fence<WRITER_FENCE>();
        f = 1;
    } else if (threadIdx.x == 32) {
        while (f == 0) {}
        fence<READER_FENCE>();
        RES(0) = d;  // LINE:mps_data_load
    }
}

// mp_shared_fence_both. Source: herdtools7 catalogue/ptx/tests/mp+membar.ctas.litmus, its locations
// in shared memory, both threads in one CTA. Verdict: clean: fence.cta then a strong (volatile) flag
// store is a release pattern, the flag's load then fence.cta an acquire pattern, both of the CTA's
// scope, which holds both threads: D's plain store precedes its plain load; RES(0) = 0 forbidden.
extern "C" __global__ void mp_shared_fence_both(int* out, int n) { mp_shared<CTA, CTA>(out); }

// mp_shared_fence_writer. Source: as mp_shared_fence_both, the reader's fence removed. Verdict: race:
// no acquire pattern: D's plain store and load conflict unordered (a data race); RES(0) = 0 allowed.
extern "C" __global__ void mp_shared_fence_writer(int* out, int n) { mp_shared<CTA, NONE>(out); }

// mp_shared_no_fence. Source: herdtools7 catalogue/ptx/tests/mp.litmus in shared memory, one CTA.
// Verdict: race: neither pattern; a data race on D.
extern "C" __global__ void mp_shared_no_fence(int* out, int n) { mp_shared<NONE, NONE>(out); }
