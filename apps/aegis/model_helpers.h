// `aegis submit --model FILE.py:NAME`: runs the repository's PyTorch helpers
// (scripts/model_spec.py, scripts/faketensor_estimate.py) in the submitting user's own
// process, so that the job carries its model spec and FakeTensor estimate; aegisd never
// runs user code. Errors are one line naming the helper.
#pragma once
#include <optional>
#include <string>

#include "estimate/features.h"

namespace aegis::cli {

struct ModelHelperArgs {
  std::string model;        // FILE.py:NAME
  int batch_size = 0;
  std::string input_shape;  // one sample's shape, "3,224,224"
  std::string input_dtype = "float32";
};

struct HelperResults {
  ModelFeatures features;
  double faketensor_mib = 0;  // the helper's peak_mib (no context, no allocator)
};

// Throws ClientError on a helper that fails or prints what it should not.
HelperResults run_model_helpers(const ModelHelperArgs& a);

}  // namespace aegis::cli
