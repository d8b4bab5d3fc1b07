// Litmus family RMW and scope: read-modify-writes, the packed look-back word, atomic scopes.
// Tests: rmw_poll, rmw_poll_cas (grid 2), lookback_packed64, lookback_split_fenced, lookback_split_unfenced
// (grid 4), atomic_add_two_blocks, atomic_add_block_two_blocks (grid 2), atomic_add_block_one_block
// (grid 1, block 64: two warps), plain_load_vs_atomic_exch (grid 2). Block 1 unless said.
// Sources: PTX ISA "Memory Consistency Model": morally strong operations (8.6), data races
// (8.6.1), Atomicity axiom (8.9.3); Lustig et al., ASPLOS 2019, sections 3.3 and 3.5.3;
// Merrill & Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016, section 4.

// rmw_poll. Source: PTX 8.9.3 (Atomicity: an atomic reads the write just before it in coherence
// order) and Lustig et al. 2019, section 3.5.3. Block 0: RES(0) = atomicAdd(&X, 0), then
// atomicExch(&Y, 1). Block 1: polls atomicAdd(&Y, 0) until 1, then atomicExch(&X, 2).
// Verdict: clean: all atomics of gpu scope (morally strong), no data race. atomicAdd(&X, 0) leaves
// X unchanged and publishes nothing: block 1's atomicExch is no stale read of it. The model allows
// RES(0) = 0 and RES(0) = 2 (no fence, no dependency); the final X is 2.
extern "C" __global__ void rmw_poll(int* out, int n) {
    if (ROLE(0)) {
        RES(0) = atomicAdd(AT(X), 0);
        atomicExch(AT(Y), 1);
    } else if (ROLE(1)) {
        while (atomicAdd(AT(Y), 0) != 1) {}
        atomicExch(AT(X), 2);
    }
}

// rmw_poll_cas. Source: as rmw_poll, with failed compare-and-swaps (PTX 8.9.3; a CAS that fails
// writes nothing). Block 0: RES(0) = atomicCAS(&X, 5, 7) (fails: X is not 5), then atomicExch(&Y, 1).
// Block 1: polls atomicCAS(&Y, 1, 1) until it returns 1, then atomicExch(&X, 2). Verdict: clean: all
// atomics of gpu scope, no data race; a failed CAS publishes nothing; RES(0) is 0 or 2, the final X 2.
extern "C" __global__ void rmw_poll_cas(int* out, int n) {
    if (ROLE(0)) {
        RES(0) = atomicCAS(AT(X), 5, 7);
        atomicExch(AT(Y), 1);
    } else if (ROLE(1)) {
        while (atomicCAS(AT(Y), 1, 1) != 1) {}
        atomicExch(AT(X), 2);
    }
}

// lookback_packed64. Source: Merrill & Garland 2016, section 4 (status and inclusive prefix in one
// word, read and written whole). Block b publishes WORD64(b) = 1 << 32 | (1 + ... + b + 1) by
// atomicExch; block b > 0 polls WORD64(b - 1) with atomicAdd(&w, 0) until its status half is set.
// RES(b) is block b's prefix. Verdict: clean: every access to a word is a gpu-scope atomic (morally
// strong), and the value travels in the word the reader read, so no other location needs ordering;
// RES = 1, 3, 6, 10.
extern "C" __global__ void lookback_packed64(int* out, int n) {
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x;
    int prefix = b + 1;
    if (b > 0) {
        unsigned long long w;
        while (((w = atomicAdd(WORD64(b - 1), 0ull)) >> 32) == 0) {}
        prefix += (int)(w & 0xffffffffu);
    }
    RES(b) = prefix;
    atomicExch(WORD64(b), 1ull << 32 | (unsigned)prefix);
}

// Look-back with the prefix and the status in two words: block b stores V + b (plain), [fences,]
// sets S + b by atomicExch; block b > 0 polls S + b - 1 with atomicAdd(&s, 0), [fences,] loads V + b - 1.
template <bool FENCES>
__device__ void lookback_split(int* out) {
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x;
    int prefix = b + 1;
    if (b > 0) {
        while (atomicAdd(AT(S + b - 1), 0) == 0) {}
        if (FENCES) __threadfence();
        prefix += out[V + b - 1];  // LINE:lbs_value_load
    }
    RES(b) = prefix;
    out[V + b] = prefix;  // LINE:lbs_value_store
    if (FENCES) __threadfence();
    atomicExch(AT(S + b), 1);
}

// lookback_split_fenced. Source: Merrill & Garland 2016, section 4 (a fence between the prefix's
// store and the status's, and between reading the status and the prefix). Verdict: clean: release
// and acquire patterns at gpu scope; RES = 1, 3, 6, 10.
extern "C" __global__ void lookback_split_fenced(int* out, int n) { lookback_split<true>(out); }

// lookback_split_unfenced. Source: as lookback_split_fenced, without the fences (the bug the
// paper's section 4 warns of; tests/kernels/part5_missing_fence.cu). Verdict: race: the plain prefix's
// store and load are not ordered (relaxed atomics order nothing): a data race, a stale prefix allowed.
extern "C" __global__ void lookback_split_unfenced(int* out, int n) { lookback_split<false>(out); }

// atomic_add_two_blocks. Source: PTX 8.6 (morally strong: both strong, each one's scope holds the
// other thread) and 8.9.3. Blocks 0 and 1 each atomicAdd(&X, 1). Verdict: clean: gpu-scope atomics
// are morally strong; the final X is 2.
extern "C" __global__ void atomic_add_two_blocks(int* out, int n) {
    if (ROLE(0) || ROLE(1)) atomicAdd(AT(X), 1);
}

// atomic_add_block_two_blocks. Source: PTX 8.6 and 8.6.1; Lustig et al. 2019, section 3.3 (a scope
// that does not hold the other thread makes the pair morally weak). Blocks 0 and 1 each
// atomicAdd_block(&X, 1). Verdict: race: atom.cta from two blocks is not morally strong: conflicting,
// unordered: a data race (and the RMW need not be atomic with respect to the other: X may end at 1).
extern "C" __global__ void atomic_add_block_two_blocks(int* out, int n) {
    if (ROLE(0)) atomicAdd_block(AT(X), 1);  // LINE:aab_block0
    if (ROLE(1)) atomicAdd_block(AT(X), 1);  // LINE:aab_block1
}

// atomic_add_block_one_block. Source: as atomic_add_block_two_blocks, both threads in one block
// (threads 0 and 32: two warps). Verdict: clean: atom.cta's scope holds both; the final X is 2.
extern "C" __global__ void atomic_add_block_one_block(int* out, int n) {
    if (threadIdx.x == 0 || threadIdx.x == 32) atomicAdd_block(AT(X), 1);
}

// plain_load_vs_atomic_exch. Source: PTX 8.6.1 (a data race: conflicting, at least one not morally
// strong, not ordered by causality). Block 0: atomicExch(&X, 1); block 1: RES(0) = X (a plain load).
// Verdict: race: the plain load is weak, so the pair is not morally strong, and nothing orders it.
extern "C" __global__ void plain_load_vs_atomic_exch(int* out, int n) {
    if (ROLE(0)) atomicExch(AT(X), 1);  // LINE:plx_exch
    if (ROLE(1)) RES(0) = out[X];  // LINE:plx_load
}
