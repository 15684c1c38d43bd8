// GPUMemNet's MLP dataset rows (data/gpumemnet/mlp_data_step{1,2}.csv) as MemorySamples.
// The estimate layer does not read files: the caller owns the CSV reader and hands over
// one row's fields by column name; errors come back naming the field so that the caller
// can add the file and line.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "estimate/memory_sample.h"

namespace aegis {

// The columns read. "Dropout Layers" and "Batch Normalization Layers" are absent from
// step 1 (no such layers there): 0 when the column is missing.
inline constexpr std::string_view kGpuMemNetTarget = "Max GPU Memory (MiB)";
inline constexpr std::string_view kGpuMemNetRequired[] = {
    "Depth", "Activations-Params", "Activation Function", "Total Activations",
    "Total Parameters", "Batch Size", kGpuMemNetTarget};

struct FieldError {
  std::string field;  // the column
  std::string what;   // "expected a positive integer, got 'x'"
};

// The value of a column in the current row; nullopt when the file has no such column.
using FieldLookup = std::function<std::optional<std::string>(std::string_view column)>;

std::variant<MemorySample, FieldError> gpumemnet_sample(const FieldLookup& field);

// Counts the layer types of a layer list "[('linear', 629, 792540), ('ReLU', 629, 0)]",
// named as PyTorch's module classes in lower case ("linear", "relu", "batchnorm1d",
// "dropout", "softmax"): the names scripts/model_spec.py writes. Error text on failure.
std::variant<std::map<std::string, int>, std::string> count_layer_types(std::string_view list);

// The dataset's layer name in PyTorch's lower-case class naming ("batch_normalization"
// -> "batchnorm1d": the dataset's networks are MLPs).
std::string torch_layer_name(std::string_view dataset_name);

}  // namespace aegis
