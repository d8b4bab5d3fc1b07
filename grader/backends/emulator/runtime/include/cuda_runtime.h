/* scangrade CPU emulator: stub cuda_runtime.h. The prelude (force-included) already provides the
 * device dialect; this header only adds the host API types a kernel file may name. */
#pragma once
#include "cuda_runtime_api.h"
