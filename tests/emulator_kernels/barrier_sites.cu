// Barriers at different call sites (wrong on a GPU: barrier-divergence, also without checks) and a
// barrier after an early return (allowed on sm_70+: exited threads do not count; passes unchecked).

extern "C" __global__ void two_sites(int* out, int n)
{
    __shared__ int s[64];
    s[threadIdx.x] = (int)threadIdx.x;
    if (threadIdx.x < 32) {
        __syncthreads();  // LINE:site_a
    } else {
        __syncthreads();  // LINE:site_b
    }
    out[threadIdx.x] = s[63 - threadIdx.x];
}

extern "C" __global__ void barrier_in_branch(int* out, int n)
{
    __shared__ int s[64];
    s[threadIdx.x] = 1;
    if ((int)threadIdx.x < n) {
        __syncthreads();  // LINE:in_branch
        s[threadIdx.x] += s[n - 1 - threadIdx.x];
    }
    __syncthreads();  // LINE:after_branch
    out[threadIdx.x] = s[threadIdx.x];
}

extern "C" __global__ void early_return(int* out, int n)
{
    __shared__ int s[64];
    if ((int)threadIdx.x >= n) return;
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[n - 1 - threadIdx.x];
}

// Threads at or past n skip the loop's barrier with a `continue` and wait at the one after the
// loop while the others wait in the loop: divergence, named with the `continue` that caused it.
extern "C" __global__ void skip_with_continue(int* out, int n)
{
    __shared__ int s[64];
    s[threadIdx.x] = 1;
    __syncthreads();
    for (int d = 1; d < 64; d *= 2) {
        if ((int)threadIdx.x >= n)
            continue;  // LINE:continue
        s[threadIdx.x] += 1;
        __syncthreads();  // LINE:loop_bar
    }
    __syncthreads();  // LINE:end_bar
    out[threadIdx.x] = s[threadIdx.x];
}
