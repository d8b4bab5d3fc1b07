// Litmus family Co: coherence, one location X. Tests: corr, corr_plain, coww, corw, cowr.
// Sources: Lustig et al., ASPLOS 2019, Figure 9 (CoRR, CoRW, CoWR, CoWW) and section 3.5.5
// (SC-per-Location: morally strong communication order cannot contradict program order);
// herdtools7 catalogue/ptx/tests/coRR.litmus (commit 3753fa29f; Alglave et al., ASPLOS 2015);
// PTX ISA "Memory Consistency Model", Coherence (8.9.1) and SC per location (8.9.5) axioms.
// Shape: grid 2 (grid 1 for coww), block 1; the final X is read by the host.

// corr. Source: Lustig et al. 2019, Figure 9a; herdtools7 catalogue/ptx/tests/coRR.litmus.
// Block 0 stores X = 1; block 1 loads X twice (RES(0), RES(1)), all volatile. Verdict: clean:
// strong accesses (no data race); RES = (1, 0) is forbidden (a later load cannot see an older value).
extern "C" __global__ void corr(int* out, int n) {
    if (ROLE(0)) {
        VOL(X) = 1;
    } else if (ROLE(1)) {
        RES(0) = VOL(X);
        RES(1) = VOL(X);
    }
}

// corr_plain. Source: herdtools7 catalogue/ptx/tests/coRR.litmus as written (ld.cg/st.cg: weak in
// the PTX 6 model). Verdict: race: block 0's weak store and block 1's weak loads of X are conflicting
// and unordered: a data race, and no coherence guarantee for the two loads.
extern "C" __global__ void corr_plain(int* out, int n) {
    if (ROLE(0)) {
        out[X] = 1;  // LINE:corrp_store
    } else if (ROLE(1)) {
        RES(0) = out[X];  // LINE:corrp_load1
        RES(1) = out[X];  // LINE:corrp_load2
    }
}

// coww. Source: Lustig et al. 2019, Figure 9d. One thread stores X = 1 then X = 2 (plain).
// Verdict: clean: one thread, no conflict with another; the final X = 1 is forbidden.
extern "C" __global__ void coww(int* out, int n) {
    if (ROLE(0)) {
        out[X] = 1;
        out[X] = 2;
    }
}

// corw. Source: Lustig et al. 2019, Figure 9b, both threads' accesses volatile. Block 0 stores
// X = 1; block 1 loads X (RES(0)) then stores X = 2. Verdict: clean: strong accesses; RES(0) = 1 with
// a final X = 1 is forbidden (block 1's store comes after the store it read in coherence order).
extern "C" __global__ void corw(int* out, int n) {
    if (ROLE(0)) {
        VOL(X) = 1;
    } else if (ROLE(1)) {
        RES(0) = VOL(X);
        VOL(X) = 2;
    }
}

// cowr. Source: Lustig et al. 2019, Figure 9c, volatile. Block 0 stores X = 1; block 1 stores
// X = 2 then loads X (RES(0)). Verdict: clean: strong accesses; a final X = 2 with RES(0) = 1 is
// forbidden (block 1's load cannot read a store older than its own).
extern "C" __global__ void cowr(int* out, int n) {
    if (ROLE(0)) {
        VOL(X) = 1;
    } else if (ROLE(1)) {
        VOL(X) = 2;
        RES(0) = VOL(X);
    }
}
