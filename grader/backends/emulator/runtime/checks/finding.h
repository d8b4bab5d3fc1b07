// The runtime, checks: a finding of the checks and a thread's failure, fixed-size records.
#pragma once

#include "util.h"

namespace sg::rt {

// Fixed-size, so that a fault handler can fill it without allocating.
struct ErrorRecord {
    bool set = false;
    uint64_t block_linear = 0;
    bool has_ids = false;
    uint3 block{0, 0, 0};
    uint3 thread{0, 0, 0};
    Kind kind = Kind::internal;
    char message[1536] = {0};
};

// One finding of the checks. Locations: "@<hex pc offset>" or "<file>:<line>" or "".
struct Finding {
    Kind kind;
    char loc[200];
    char other[200];
    uint3 block, thread, oblock, othread;
    int has_other;
    uint64_t block_linear;
    uint64_t seq;
    char msg[640];
    char access[24];  // a race: its kind (race_names: read-after-write...), else empty
    char where[160];  // a race: the element both accessed (`s[37] (inside shared array s, 256 elements)`), else empty
};

}  // namespace sg::rt
