// Names shared by the litmus kernels; tests/backends/test_litmus.py puts this text before each kernel file.
// `out` holds the shared locations first and the readers' results after them; the host reads both.
enum { X = 0, Y = 1, Z = 2, F = 3, D = 4, V = 8, S = 16 };  // locations (V, S: look-back values, flags)
#define AT(i) (out + (i))                       // a location, to pass to an atomic
#define VOL(i) (*(volatile int*)(out + (i)))    // a volatile access: relaxed, system scope (strong)
#define RES(i) (out[32 + (i)])                  // what a reader saw (written by one thread only)
#define WORD64(i) ((unsigned long long*)(out + 48) + (i))  // 64-bit words (8-byte aligned)
#define ROLE(b) (blockIdx.x == (b) && threadIdx.x == 0)    // one thread of block b plays a role
