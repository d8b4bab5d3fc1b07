// counters[0]: one atomicAdd per thread; counters[1]: sum of threadIdx.x; counters[2]: per-block
// shared-memory counts added once per block; counters[3]: atomicMax of the global thread id;
// counters[4]: atomicMin; counters[5]: atomicCAS-based increment; counters[6]: atomicSub.
__global__ void count_atomics(int* counters, int n) {
    __shared__ int local;
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) local = 0;
    __syncthreads();
    atomicAdd(&local, 1);
    atomicAdd(&counters[0], 1);
    atomicAdd(&counters[1], (int)threadIdx.x);
    atomicMax(&counters[3], g);
    atomicMin(&counters[4], g);
    int old = counters[5], assumed;
    do {
        assumed = old;
        old = atomicCAS(&counters[5], assumed, assumed + 1);
    } while (old != assumed);
    atomicSub(&counters[6], 2);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(&counters[2], local);
}
