/* scangrade CPU emulator: stub device_launch_parameters.h. threadIdx, blockIdx, blockDim, gridDim
 * and warpSize come from the force-included prelude. */
#ifndef SCANGRADE_STUB_DEVICE_LAUNCH_PARAMETERS_H
#define SCANGRADE_STUB_DEVICE_LAUNCH_PARAMETERS_H
#endif
