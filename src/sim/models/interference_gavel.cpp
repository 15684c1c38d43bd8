// Gavel's measured pairs with solo profiles borrowed from Lucid's single-job table
// (interference.h, load_gavel_pairs): Gavel recorded throughputs only, no utilisation.
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <tuple>

#include "sim/csv.h"
#include "sim/models/interference.h"

namespace aegis {

namespace {

struct Borrowed {
  std::string network;
  ActivityProfile profile;
};

// Gavel's job type ("('ResNet-50 (batch size 64)', 1)") to the Lucid profile of the same
// network and dataset; nothing for single-GPU types Lucid did not profile.
class ProfileMap {
 public:
  explicit ProfileMap(const std::string& single_csv) {
    CsvReader r = CsvReader::open(single_csv);
    while (r.next()) {
      if (r.get_int("amp") != 0) continue;
      const double u = r.get_double("gpu_util"), d = r.get_double("gmem_util");
      if (u < 0 || u > 100) r.fail("gpu_util", "not a percentage");
      if (d < 0 || d > 100) r.fail("gmem_util", "not a percentage");
      solo_[{r.get_text("model"), r.get_text("dataset")}][r.get_int("batchsize")] = {u / 100, d / 100};
    }
  }

  std::optional<Borrowed> find(const std::string& gavel_type) const {
    static const std::regex re(R"(\('(.+?) \(batch size (\d+)\)', 1\))");
    static const std::map<std::string, std::pair<std::string, std::string>> same{
        {"ResNet-18", {"ResNet18", "CIFAR-10"}},
        {"ResNet-50", {"ResNet50", "ImageNet"}},
        {"Transformer", {"Transformer", "Multi30k"}},
        {"LM", {"LSTM", "Wikitext2"}}};
    std::smatch m;
    if (!std::regex_match(gavel_type, m, re)) return std::nullopt;
    const auto net = same.find(m[1].str());
    if (net == same.end()) return std::nullopt;
    const auto sizes = solo_.find(net->second);
    if (sizes == solo_.end()) return std::nullopt;
    const double want = std::stod(m[2].str());
    const ActivityProfile* best = nullptr;
    double best_gap = 1e300;
    for (const auto& [bs, p] : sizes->second) {  // ascending: ties go to the smaller
      const double gap = std::fabs(std::log(static_cast<double>(bs) / want));
      if (gap < best_gap - 1e-12) {
        best_gap = gap;
        best = &p;
      }
    }
    return Borrowed{net->second.first, *best};
  }

 private:
  std::map<std::pair<std::string, std::string>, std::map<std::int64_t, ActivityProfile>> solo_;
};

// Gavel's throughput table of one GPU type (job type -> partner -> [own, partner's]).
nlohmann::json gavel_table(const std::string& json_path, const std::string& gpu_type) {
  std::ifstream f(json_path);
  if (!f) throw InputError(json_path + ": cannot open file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(json_path + ": not valid JSON: " + e.what());
  }
  if (!j.contains(gpu_type) || !j[gpu_type].is_object())
    throw InputError(json_path + ": no table for GPU type '" + gpu_type + "'");
  return j[gpu_type];
}

}  // namespace

std::vector<MeasuredPair> load_gavel_pairs(const std::string& json_path, const std::string& gpu_type,
                                           const std::string& lucid_single_csv,
                                           std::vector<std::pair<std::string, std::string>>* networks) {
  const ProfileMap profiles(lucid_single_csv);
  const nlohmann::json t = gavel_table(json_path, gpu_type);
  auto solo_of = [&](const std::string& name) {
    const auto& row = t[name];
    return row.contains("null") && row["null"].is_number() ? row["null"].get<double>() : 0.0;
  };
  std::vector<MeasuredPair> out;
  std::map<std::pair<std::string, std::string>, bool> seen;
  for (const auto& [a, row] : t.items()) {
    const auto pa = profiles.find(a);
    const double solo_a = solo_of(a);
    if (!pa || solo_a <= 0) continue;
    for (const auto& [b, pair] : row.items()) {
      if (b == "null" || !pair.is_array() || pair.size() != 2 || !t.contains(b) || seen.count({b, a})) continue;
      const auto pb = profiles.find(b);
      const double solo_b = solo_of(b);
      if (!pb || solo_b <= 0 || !pair[0].is_number() || !pair[1].is_number()) continue;
      const double own = pair[0].get<double>(), other = pair[1].get<double>();
      if (own <= 0 || other <= 0) continue;
      seen[{a, b}] = true;
      out.push_back({pa->profile, pb->profile, own / solo_a, other / solo_b});
      if (networks) networks->emplace_back(pa->network, pb->network);
    }
  }
  return out;
}

std::vector<double> load_gavel_pair_sums(const std::string& json_path, const std::string& gpu_type) {
  const nlohmann::json t = gavel_table(json_path, gpu_type);
  std::vector<double> sums;
  for (const auto& [a, row] : t.items()) {
    if (!row.contains("null") || !row["null"].is_number()) continue;
    const double solo_a = row["null"].get<double>();
    for (const auto& [b, pair] : row.items()) {
      if (b == "null" || !pair.is_array() || pair.size() != 2 || !t.contains(b)) continue;
      const double solo_b = t[b]["null"].get<double>();
      const double own = pair[0].get<double>(), other = pair[1].get<double>();
      if (solo_a <= 0 || solo_b <= 0 || own <= 0 || other <= 0) continue;
      sums.push_back(own / solo_a + other / solo_b);
    }
  }
  return sums;
}

}  // namespace aegis
