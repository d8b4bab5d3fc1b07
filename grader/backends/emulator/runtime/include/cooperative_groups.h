/* scangrade CPU emulator: cooperative groups are not emulated. */
#error "not supported by the emulator: cooperative_groups.h (use __syncthreads and shared memory)"
