// Litmus family IRIW, ISA2, WRC: several blocks of one thread (block 1).
// Tests: iriw_plain, iriw_fenced (grid 4), isa2_fenced, isa2_middle_unfenced, wrc_fenced,
// wrc_middle_unfenced (grid 3).
// Sources: herdtools7 catalogue/ptx/tests/iriw.litmus (commit 3753fa29f; Alglave et al., ASPLOS
// 2015); Lustig et al., ASPLOS 2019, section 3.4.4 (base causality composes "from producer to
// intermediate hop to consumer") and Figure 12 (an ISA2 variant); PTX ISA "Memory Consistency
// Model", base causality order (8.8.5), Causality axiom (8.9.6), Fence-SC (8.9.2).

// iriw_plain. Source: herdtools7 catalogue/ptx/tests/iriw.litmus as written (weak ld/st, no
// fences). Block 0 stores X = 1, block 2 stores Y = 1; block 1 loads X then Y, block 3 loads Y then
// X (RES(0..3)). Verdict: race: every store and the other blocks' loads of its location are weak,
// conflicting and unordered: a data race (and the readers may disagree on the order of the stores).
extern "C" __global__ void iriw_plain(int* out, int n) {
    if (ROLE(0)) {
        out[X] = 1;  // LINE:iriwp_x_store
    } else if (ROLE(1)) {
        RES(0) = out[X];  // LINE:iriwp_x_load1
        RES(1) = out[Y];  // LINE:iriwp_y_load1
    } else if (ROLE(2)) {
        out[Y] = 1;  // LINE:iriwp_y_store
    } else if (ROLE(3)) {
        RES(2) = out[Y];  // LINE:iriwp_y_load3
        RES(3) = out[X];  // LINE:iriwp_x_load3
    }
}

// iriw_fenced. Source: herdtools7 catalogue/ptx/tests/iriw.litmus with volatile accesses and a
// fence.sc.gpu (__threadfence()) between each reader's loads; each reader first waits until its
// first location is 1. Verdict: clean: strong accesses (no data race), and the readers' morally
// strong fence.sc are ordered in Fence-SC order, so both readers seeing the other store missing
// (RES(1) = 0 and RES(3) = 0) is forbidden.
extern "C" __global__ void iriw_fenced(int* out, int n) {
    if (ROLE(0)) {
        VOL(X) = 1;
    } else if (ROLE(1)) {
        while ((RES(0) = VOL(X)) == 0) {}
        __threadfence();
        RES(1) = VOL(Y);
    } else if (ROLE(2)) {
        VOL(Y) = 1;
    } else if (ROLE(3)) {
        while ((RES(2) = VOL(Y)) == 0) {}
        __threadfence();
        RES(3) = VOL(X);
    }
}

// ISA2: block 0 stores the data D = 1 (plain), fences, sets Y; block 1 waits for Y, [fences,] sets Z;
// block 2 waits for Z, fences, loads D into RES(0). Flags volatile.
template <bool MIDDLE_FENCE>
__device__ void isa2(int* out) {
    if (ROLE(0)) {
        out[D] = 1;  // LINE:isa2_data_store
        __threadfence();
        VOL(Y) = 1;
    } else if (ROLE(1)) {
        while (VOL(Y) == 0) {}
        if (MIDDLE_FENCE) __threadfence();
        VOL(Z) = 1;
    } else if (ROLE(2)) {
        while (VOL(Z) == 0) {}
        __threadfence();
        RES(0) = out[D];  // LINE:isa2_data_load
    }
}

// isa2_fenced. Source: Lustig et al. 2019, Figure 12 and section 3.4.4; PTX 8.8.5. Verdict: clean:
// each link is a release pattern observed by an acquire pattern, and base causality is transitive,
// so D's store precedes its load in causality order: no data race; RES(0) = 0 forbidden.
extern "C" __global__ void isa2_fenced(int* out, int n) { isa2<true>(out); }

// isa2_middle_unfenced. Source: as isa2_fenced, block 1 without its fence. Verdict: race: block 1's
// read of Y and store to Z form neither an acquire nor a release pattern, the chain breaks, and D's
// plain store and load are unordered: a data race; RES(0) = 0 allowed.
extern "C" __global__ void isa2_middle_unfenced(int* out, int n) { isa2<false>(out); }

// WRC: block 0 stores X = 1; block 1 waits for X == 1, [fences,] stores Y = 1; block 2 waits for
// Y == 1, fences, loads X into RES(0). Every access volatile (strong).
template <bool MIDDLE_FENCE>
__device__ void wrc(int* out) {
    if (ROLE(0)) {
        VOL(X) = 1;  // LINE:wrc_x_store
    } else if (ROLE(1)) {
        while (VOL(X) == 0) {}
        if (MIDDLE_FENCE) __threadfence();
        VOL(Y) = 1;
    } else if (ROLE(2)) {
        while (VOL(Y) == 0) {}
        __threadfence();
        RES(0) = VOL(X);  // LINE:wrc_x_load
    }
}

// wrc_fenced. Source: Lustig et al. 2019, section 3.4.4 (causality: observation followed by base
// causality) and the Causality axiom 8.9.6. Verdict: clean: block 0's store is observed by block 1,
// whose fence releases to block 2's fence: the store precedes block 2's load of X in causality
// order, so RES(0) = 0 is forbidden; every access is strong (no data race).
extern "C" __global__ void wrc_fenced(int* out, int n) { wrc<true>(out); }

// wrc_middle_unfenced. Source: as wrc_fenced, block 1 without its fence. Verdict: stale: no data
// race (all strong), but nothing orders X's store before block 2's load: RES(0) = 0 is allowed after
// Y was seen, and the emulator gives it (a stale-read; it changes this kernel's output).
extern "C" __global__ void wrc_middle_unfenced(int* out, int n) { wrc<false>(out); }
