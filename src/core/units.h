// Vocabulary units shared by every layer: memory in MiB, time in seconds.
// Plain aliases keep arithmetic cheap; names at call sites carry the unit (`free_mib`).
#pragma once
#include <cstdint>

namespace aegis {

using MiB = std::int64_t;       // GPU memory, mebibytes
using Seconds = double;         // time, seconds (simulated or wall clock)
using JobId = std::int64_t;     // unique per scheduler instance

}  // namespace aegis
