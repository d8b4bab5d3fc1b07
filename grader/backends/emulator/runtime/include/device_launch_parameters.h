/* scangrade CPU emulator: stub device_launch_parameters.h. threadIdx, blockIdx, blockDim, gridDim
 * and warpSize come from the force-included prelude. */
#pragma once
