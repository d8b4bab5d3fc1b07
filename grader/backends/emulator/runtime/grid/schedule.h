// The runtime, grid level: the schedules (thread orders of a round) and the seeded generator
// every random choice draws from.
#pragma once

#include "util.h"

namespace sg::rt {

// ---------------------------------------------------------------------------------------------
// Schedules: the order in which the runnable threads of a block run in each round.
// ---------------------------------------------------------------------------------------------
enum Schedule : int { kAscending = 0, kDescending = 1, kRandom = 2, kScheduleCount };

inline uint64_t splitmix(uint64_t &s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t s = a * 0x9E3779B97F4A7C15ull ^ b;
    return splitmix(s);
}

}  // namespace sg::rt
