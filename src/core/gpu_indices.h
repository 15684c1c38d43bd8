// A job's GPUs on one server, as the engine names them (GpuView::index values): a launch's,
// a running job's, and the GPUs only telemetry holds back (Blocked::pressure_gpus).
#pragma once
#include "core/small_list.h"

namespace aegis {

// Inline up to 8, a whole server of the common kind: every launch makes one and every
// running job keeps one, so as vectors they were a heap block each (the simulator made
// about three per launch: the engine's answer, the running job, a pressure refusal's
// list). Contiguous either way (std::span<const int> reads it as it read a vector).
using GpuIndices = SmallList<int, 8>;

}  // namespace aegis
