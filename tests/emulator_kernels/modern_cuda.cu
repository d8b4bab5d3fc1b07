// Modern CUDA C++ on the emulator: libcu++ atomics (<cuda/atomic>, <cuda/std/atomic>), the scoped
// atomic functions, and the inline PTX of the memory model and the special registers
// (tests/backends/test_emulator_modern_cuda.py). nvcc compiles this file with the toolkit's own headers.
#include <cuda/atomic>
#include <cuda/std/atomic>

// Message passing between blocks (as memory_order.cu): block b stores a value and then a flag for
// block b + 1, which waits for the flag and reads the value. out: values, flags, results (gridDim.x each).
#define VALUES(out) (out)
#define FLAGS(out) ((out) + gridDim.x)
#define RESULTS(out) ((out) + 2 * gridDim.x)

__device__ unsigned lane_id() {
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

// An inclusive scan of each warp's elements (out[0, n)), the lane read from %laneid; then, for each
// thread, what the other special registers say: out[n + i] = %warpid * 32 + popc(%lanemask_lt), and
// out[2n + i] = 1 where the lane masks agree with each other and with the lane.
extern "C" __global__ void warp_scan_laneid(int* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = lane_id();
    int v = i < n ? out[i] : 0;
    for (int d = 1; d < 32; d *= 2) {
        int up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= (unsigned)d) v += up;
    }
    if (i < n) out[i] = v;
    unsigned warp, eq, lt, le, gt, ge;
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
    asm("mov.u32 %0, %%lanemask_eq;\n\tmov.u32 %1, %%lanemask_lt;\n\tmov.u32 %2, %%lanemask_le;"
        : "=r"(eq), "=r"(lt), "=r"(le));
    asm("mov.u32 %0, %%lanemask_gt; mov.u32 %1, %%lanemask_ge;" : "=r"(gt), "=r"(ge));
    if (i < n) {
        out[n + i] = (int)(warp * 32 + __popc(lt));
        out[2 * n + i] = eq == (1u << lane) && le == (lt | eq) && gt == ~le && ge == ~lt;
    }
}

// Block b (its thread 0) waits for block b - 1's flag (wait), reads its value, stores its own value
// and publishes its flag (publish).
template <class Wait, class Publish>
__device__ void pass_message(int* out, Wait wait, Publish publish) {
    const int b = blockIdx.x;
    if (threadIdx.x != 0) return;
    if (b > 0) {
        wait(&FLAGS(out)[b - 1]);
        RESULTS(out)[b] = VALUES(out)[b - 1];  // LINE:value_load
    }
    VALUES(out)[b] = b + 1;
    publish(&FLAGS(out)[b]);
}

typedef cuda::atomic_ref<int, cuda::thread_scope_device> device_ref;

// Correct: a release store of the flag and an acquire load of it (cuda::atomic_ref at device scope).
extern "C" __global__ void atomic_ref_release_acquire(int* out, int n) {
    pass_message(
        out, [](int* f) { while (device_ref(*f).load(cuda::memory_order_acquire) == 0) {} },
        [](int* f) { device_ref(*f).store(1, cuda::memory_order_release); });
}

// Wrong: relaxed atomics order nothing (the emulator's checks must see the orders asked for).
extern "C" __global__ void atomic_ref_relaxed(int* out, int n) {
    pass_message(
        out, [](int* f) { while (device_ref(*f).load(cuda::memory_order_relaxed) == 0) {} },
        [](int* f) { device_ref(*f).store(1, cuda::memory_order_relaxed); });
}

// Correct: relaxed flag operations (cuda::std::atomic_ref, system scope) ordered by fences.
extern "C" __global__ void std_fences(int* out, int n) {
    pass_message(
        out,
        [](int* f) {
            while (cuda::std::atomic_ref<int>(*f).load(cuda::std::memory_order_relaxed) == 0) {
            }
            cuda::std::atomic_thread_fence(cuda::std::memory_order_acquire);
        },
        [](int* f) {
            cuda::std::atomic_thread_fence(cuda::std::memory_order_release);
            cuda::std::atomic_ref<int>(*f).store(1, cuda::std::memory_order_relaxed);
        });
}

// Correct: the same with cuda::atomic_thread_fence at device scope (sequentially consistent, acq_rel).
extern "C" __global__ void scoped_fences(int* out, int n) {
    pass_message(
        out,
        [](int* f) {
            while (device_ref(*f).load(cuda::memory_order_relaxed) == 0) {
            }
            cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_device);
        },
        [](int* f) {
            cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);
            device_ref(*f).store(1, cuda::memory_order_relaxed);
        });
}

// Correct: inline PTX ld.acquire.gpu of the flag and st.release.gpu of it.
extern "C" __global__ void ptx_release_acquire(int* out, int n) {
    pass_message(
        out,
        [](int* f) {
            int seen = 0;
            while (seen == 0) asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(f) : "memory");
        },
        [](int* f) { asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(f), "r"(1) : "memory"); });
}

__device__ int load_relaxed(const int* f) {
    int seen;
    asm volatile("ld.relaxed.gpu.u32 %0, [%1];" : "=r"(seen) : "l"(f));
    return seen;
}

__device__ void store_relaxed(int* f, int v) { asm volatile("st.relaxed.gpu.u32 [%0], %1;" ::"l"(f), "r"(v)); }

// Correct: relaxed PTX flag accesses ordered by fence.acq_rel.gpu (reader) and fence.sc.gpu (writer).
extern "C" __global__ void ptx_fences(int* out, int n) {
    pass_message(
        out,
        [](int* f) {
            while (load_relaxed(f) == 0) {
            }
            asm volatile("fence.acq_rel.gpu;" ::: "memory");
        },
        [](int* f) {
            asm volatile("fence.sc.gpu;" ::: "memory");
            store_relaxed(f, 1);
        });
}

// Wrong: relaxed PTX flag accesses without a fence.
extern "C" __global__ void ptx_relaxed(int* out, int n) {
    pass_message(
        out, [](int* f) { while (load_relaxed(f) == 0) {} }, [](int* f) { store_relaxed(f, 1); });
}

// Counting with every scope: out[0..2] by atomicAdd_block / atomicAdd / atomicAdd_system, out[3] by
// cuda::atomic_ref<..., block> in shared memory then one add per block; out[4..] the other operations
// (see the test).
extern "C" __global__ void scoped_counts(int* out, int n) {
    __shared__ int block_count;
    if (threadIdx.x == 0) block_count = 0;
    __syncthreads();
    atomicAdd_block(&out[0], 1);
    atomicAdd(&out[1], 1);
    atomicAdd_system(&out[2], 1);
    cuda::atomic_ref<int, cuda::thread_scope_block> bc(block_count);
    ++bc;
    __syncthreads();
    if (threadIdx.x == 0) cuda::atomic_ref<int, cuda::thread_scope_device>(out[3]).fetch_add(bc.load());
    atomicMax_system(&out[4], (int)threadIdx.x);
    atomicMin_block(&out[5], -(int)threadIdx.x);
    atomicOr_system(&out[6], 1 << (threadIdx.x % 31));
    atomicCAS_block(&out[7], 0, 7);
    atomicExch_system(&out[8], 8);
    atomicSub_block(&out[9], 1);
    cuda::atomic_ref<int> r(out[10]);  // system scope
    r.fetch_max((int)threadIdx.x, cuda::memory_order_relaxed);
    cuda::atomic_ref<int, cuda::thread_scope_device> s(out[11]);
    s += 2;
    s--;
    s.fetch_xor(0, cuda::memory_order_acq_rel);
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> u(*(unsigned*)&out[12]);
    u.fetch_or(1u << (threadIdx.x % 32));
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        cuda::atomic_ref<int, cuda::thread_scope_system> e(out[13]);
        int expected = 5;
        bool first = e.compare_exchange_strong(expected, 6);  // out[13] is 0: fails, expected = 0
        bool second = e.compare_exchange_weak(expected, 6, cuda::memory_order_acq_rel, cuda::memory_order_acquire);
        out[14] = first * 10 + second;
        out[15] = e.exchange(9) * 100 + e.load() + e.is_lock_free() * 1000;
        e = 3;
        out[16] = e;
        cuda::atomic_ref<float, cuda::thread_scope_device> f(*(float*)&out[17]);
        f.store(1.5f);
        f.fetch_add(2.25f);
        out[18] = (int)(f.load() * 4);
        e.fetch_min(-4);
        e.fetch_and(~1);
        out[19] = e.load();
        e.notify_all();
        e.wait(0);  // the value is -4: returns at once
    }
}

// Inline PTX atom and red (thread 0 of block 0 for the order-dependent ones): see the test.
extern "C" __global__ void ptx_atomics(int* out, int n) {
    int old;
    asm volatile("atom.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(&out[0]), "r"(1) : "memory");
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(&out[1]), "r"(2));
    asm volatile("atom.acq_rel.sys.max.s32 %0, [%1], %2;" : "=r"(old) : "l"(&out[2]), "r"((int)threadIdx.x));
    asm volatile("red.global.min.s32 [%0], %1;" ::"l"(&out[3]), "r"(-(int)threadIdx.x));
    asm volatile("atom.relaxed.cta.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(&out[4]), "r"(9));
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int seen;
        asm volatile("atom.global.cas.b32 %0, [%1], %2, %3;" : "=r"(seen) : "l"(&out[5]), "r"(0), "r"(42));
        asm volatile("atom.global.cas.b32 %0, [%1], %2, %3;" : "=r"(out[6]) : "l"(&out[5]), "r"(0), "r"(43));
        asm volatile("atom.exch.b32 %0, [%1], %2;" : "=r"(out[7]) : "l"(&out[8]), "r"(77));
        float f;
        asm volatile("atom.global.add.f32 %0, [%1], %2;" : "=f"(f) : "l"((float*)&out[9]), "f"(0.5f));
        asm volatile("atom.global.add.f32 %0, [%1], %2;" : "=f"(f) : "l"((float*)&out[9]), "f"(1.25f));
        out[10] = (int)(f * 4);  // the old value 0.5
        long long wide;
        asm volatile("atom.global.add.u64 %0, [%1], %2;" : "=l"(wide) : "l"((long long*)&out[12]), "l"(1ll << 40));
        int v;
        asm volatile("ld.volatile.global.s32 %0, [%1+4];" : "=r"(v) : "l"(&out[13]));
        out[11] = v;
        unsigned long long t0, t1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1));
        unsigned sm;
        asm("mov.u32 %0, %%smid;" : "=r"(sm));
        out[15] = (t0 > 0) + (t1 > 0) * 10 + (int)sm * 100;
        asm volatile("membar.gl; membar.cta; membar.sys; fence.sc.cta; fence.acq_rel.sys;" ::: "memory");
    }
}
