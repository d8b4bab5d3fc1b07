// Litmus family SB and LB: store buffering and load buffering, two blocks of one thread (grid 2,
// block 1). Tests: sb_plain, sb_atomics, sb_fenced, lb_plain, lb_volatile.
// SB: block 0 stores X = 1 then loads Y into RES(0); block 1 stores Y = 1 then loads X into RES(1).
// LB: block 0 loads X into RES(0) then stores Y = 1; block 1 loads Y into RES(1) then stores X = 1.
// Sources: herdtools7 catalogue/ptx/tests/sb.litmus and ld.litmus (the LB test; commit 3753fa29f;
// Alglave et al., ASPLOS 2015); Lustig et al., ASPLOS 2019, Figure 6 (SB with fence.sc) and Figure 8
// (load buffering, No-Thin-Air); PTX ISA "Memory Consistency Model", Fence-SC order (8.8.3), data
// races (8.6.1).

// sb_plain. Source: herdtools7 catalogue/ptx/tests/sb.litmus (plain ld/st, no fences). Shape: SB.
// Verdict: race: X's store in block 0 and its load in block 1 (and Y's pair) conflict, are weak and
// unordered: a data race by the PTX definition, in every execution.
extern "C" __global__ void sb_plain(int* out, int n) {
    if (ROLE(0)) {
        out[X] = 1;  // LINE:sbp_x_store
        RES(0) = out[Y];  // LINE:sbp_y_load
    } else if (ROLE(1)) {
        out[Y] = 1;  // LINE:sbp_y_store
        RES(1) = out[X];  // LINE:sbp_x_load
    }
}

// sb_atomics. Source: herdtools7 catalogue/ptx/tests/sb.litmus with CUDA atomics (atomicExch to
// store, atomicAdd(&v, 0) to load), no fences. Shape: SB. Verdict: clean. Every access is an
// atomic of gpu scope, so any two are morally strong: no data race. RES = (0, 0) is allowed by the
// model (no fence.sc; relaxed RMWs give no order between X and Y), so the test does not forbid it:
// it records the outcome, and any of the four is right. A flag-and-value check must not call it
// stale either: neither block reads a value guarded by something it read before.
extern "C" __global__ void sb_atomics(int* out, int n) {
    if (ROLE(0)) {
        atomicExch(AT(X), 1);
        RES(0) = atomicAdd(AT(Y), 0);
    } else if (ROLE(1)) {
        atomicExch(AT(Y), 1);
        RES(1) = atomicAdd(AT(X), 0);
    }
}

// sb_fenced. Source: Lustig et al. 2019, Figure 6 (fence.sc.gpu between each thread's store and
// load); herdtools7 catalogue/ptx/tests/sb.litmus. __threadfence() is membar.gl = fence.sc.gpu.
// Shape: SB with volatile accesses. Verdict: clean: strong accesses (no data race) and the two
// fence.sc are morally strong, ordered in Fence-SC order: RES = (0, 0) is forbidden.
extern "C" __global__ void sb_fenced(int* out, int n) {
    if (ROLE(0)) {
        VOL(X) = 1;
        __threadfence();
        RES(0) = VOL(Y);
    } else if (ROLE(1)) {
        VOL(Y) = 1;
        __threadfence();
        RES(1) = VOL(X);
    }
}

// lb_plain. Source: herdtools7 catalogue/ptx/tests/ld.litmus (GPU_PTX LB, plain ld/st). Shape: LB.
// Verdict: race: block 0's load of X and block 1's store to X are weak, conflicting and unordered.
extern "C" __global__ void lb_plain(int* out, int n) {
    if (ROLE(0)) {
        RES(0) = out[X];  // LINE:lbp_x_load
        out[Y] = 1;  // LINE:lbp_y_store
    } else if (ROLE(1)) {
        RES(1) = out[Y];  // LINE:lbp_y_load
        out[X] = 1;  // LINE:lbp_x_store
    }
}

// lb_volatile. Source: herdtools7 catalogue/ptx/tests/ld.litmus with volatile (relaxed.sys)
// accesses; Lustig et al. 2019, Figure 8. Shape: LB. Verdict: clean: strong accesses, no data
// race; with no dependency from a load to the store after it, No-Thin-Air forbids nothing here, so
// every outcome, RES = (1, 1) included, is allowed and recorded.
extern "C" __global__ void lb_volatile(int* out, int n) {
    if (ROLE(0)) {
        RES(0) = VOL(X);
        VOL(Y) = 1;
    } else if (ROLE(1)) {
        RES(1) = VOL(Y);
        VOL(X) = 1;
    }
}
