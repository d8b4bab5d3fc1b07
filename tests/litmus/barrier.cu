// Litmus family BAR: barriers and fences of different threads of a block. Tests: poll_barrier_unfenced,
// poll_fence_barrier (the reader's side), barrier_fence_flag, barrier_flag_unfenced (the writer's).
// Reader's side: a flag polled by one thread, the data read by another thread of its block after
// __syncthreads(). Shape: grid 2, block 32. Block
// 0's thread 0 stores the data D = 1 (plain), __threadfence(), then the flag F = 1 (volatile); in
// block 1, thread 0 waits for F == 1, [__threadfence(),] every thread of block 1 meets at
// __syncthreads(), then thread 5 loads D into RES(0).
// Sources: PTX ISA "Memory Consistency Model": release and acquire patterns (8.7; an acquire
// pattern is a strong read followed by a fence *of the same thread*), barriers synchronize at cta
// scope (8.8.4), base causality (8.8.5); Lustig et al., ASPLOS 2019, section 3.4.2 and the Alloy
// model github:NVlabs/ptxmemorymodel ptx.als (BarrierWait is an acquire fence of cta scope; sync
// needs the release and the acquire morally strong).

template <bool FENCE_AFTER_POLL>
__device__ void poll_barrier(int* out) {
    if (ROLE(0)) {
        out[D] = 1;  // LINE:pb_data_store
        __threadfence();
        VOL(F) = 1;
    }
    if (blockIdx.x != 1) return;
    if (threadIdx.x == 0) {
        while (VOL(F) == 0) {}
        if (FENCE_AFTER_POLL) __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 5) RES(0) = out[D];  // LINE:pb_data_load
}

// poll_barrier_unfenced. Source: PTX 8.7 and 8.8.4; ptx.als (Releasers, Acquirers, sync).
// Verdict: race: thread 0's flag read is followed by no fence of gpu scope;
// the barrier is a cta-scope acquire, not morally strong with block 0's gpu-scope release, so
// nothing synchronizes with block 0: D's store and thread 5's load are a data race. Acquire is per
// thread.
extern "C" __global__ void poll_barrier_unfenced(int* out, int n) { poll_barrier<false>(out); }

// poll_fence_barrier. Source: PTX 8.7, 8.8.4 and 8.8.5; ptx.als (cause_base).
// Verdict: clean: thread 0's read and __threadfence() form an acquire pattern
// synchronizing with block 0's release; the barrier then orders thread 0 before thread 5 (cta scope),
// so D's store precedes thread 5's load in causality order; RES(0) = 1.
extern "C" __global__ void poll_fence_barrier(int* out, int n) { poll_barrier<true>(out); }

// Writer's side: in block 0, thread 31 stores the data D = 1 (plain); every thread of block 0 meets
// at __syncthreads(); thread 0 [fences and] stores the flag F = 1 (volatile). Block 1's thread 0
// waits for F == 1, __threadfence(), loads D into RES(0). Shape: grid 2, block 32.
template <bool FENCE_BEFORE_FLAG>
__device__ void barrier_flag(int* out) {
    if (blockIdx.x == 0) {
        if (threadIdx.x == 31) out[D] = 1;  // LINE:bf_data_store
        __syncthreads();
        if (threadIdx.x != 0) return;
        if (FENCE_BEFORE_FLAG) __threadfence();
        VOL(F) = 1;
    } else if (ROLE(1)) {
        while (VOL(F) == 0) {}
        __threadfence();
        RES(0) = out[D];  // LINE:bf_data_load
    }
}

// barrier_fence_flag. Source: PTX 8.8.4 and 8.8.5 (the barrier orders thread 31's store before
// thread 0's fence; base causality is transitive); tests/emulator_kernels/memory_order.cu's
// barrier_then_fence. Verdict: clean: D's store precedes the load in causality order; RES(0) = 1.
extern "C" __global__ void barrier_fence_flag(int* out, int n) { barrier_flag<true>(out); }

// barrier_flag_unfenced. Source: PTX 8.8.4 (barrier synchronization is release-acquire at cta
// scope); ptx.als (BarrierWait is a release fence of cta scope). Verdict: race: thread 0's barrier
// then flag store is a release pattern of cta scope only, not morally strong with block 1's
// gpu-scope acquire: nothing orders D's store before block 1's load, a data race.
extern "C" __global__ void barrier_flag_unfenced(int* out, int n) { barrier_flag<false>(out); }
