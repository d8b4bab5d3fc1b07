// Every thread writes its built-in variables at its global linear index (8 ints per thread).
__global__ void record_ids(int* out, int n) {
    const int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    const int g = block * (blockDim.x * blockDim.y * blockDim.z) + thread;
    if (8 * g + 7 >= n) return;
    int* r = out + 8 * g;
    r[0] = threadIdx.x; r[1] = threadIdx.y; r[2] = threadIdx.z;
    r[3] = blockIdx.x;  r[4] = blockIdx.y;  r[5] = blockIdx.z;
    r[6] = blockDim.x * 10000 + blockDim.y * 100 + blockDim.z;
    r[7] = gridDim.x * 10000 + gridDim.y * 100 + gridDim.z + warpSize * 0;
}
