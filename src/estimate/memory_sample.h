// One measured training run: what the estimators see (the model's features) and what
// they must predict (the peak GPU memory the run used, MiB).
#pragma once
#include <string>

#include "estimate/features.h"

namespace aegis {

struct MemorySample {
  ModelFeatures features;
  double memory_mib = 0;
  std::string origin;  // "file:line", for messages and for tracing a row back
};

}  // namespace aegis
