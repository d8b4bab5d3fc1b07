/* scangrade CPU emulator: half precision is not emulated. */
#error "not supported by the emulator: cuda_fp16.h"
