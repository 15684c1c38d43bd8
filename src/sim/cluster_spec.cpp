#include <algorithm>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "core/mig_models.h"
#include "sim/csv.h"
#include "sim/simulator.h"

namespace aegis {

ClusterSpec ClusterSpec::uniform(int servers, int gpus_per_server, MiB gpu_memory_mib) {
  ClusterSpec c;
  c.servers.assign(static_cast<std::size_t>(std::max(servers, 0)), ServerSpec{gpus_per_server, gpu_memory_mib, {}});
  return c;
}

ClusterSpec ClusterSpec::parse(const std::string& spec) {
  ClusterSpec c;
  c.servers.clear();
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string part = spec.substr(pos, comma - pos);
    long long n[3] = {0, 0, 0};
    int k = 0;
    std::size_t p = 0;
    bool ok = !part.empty();
    while (ok && p < part.size() && k < 3) {
      std::size_t x = part.find('x', p);
      if (x == std::string::npos) x = part.size();
      const std::string num = part.substr(p, x - p);
      ok = !num.empty() && num.find_first_not_of("0123456789") == std::string::npos && num.size() < 10;
      if (ok) n[k++] = std::stoll(num);
      p = x + 1;
    }
    if (!ok || k != 3 || p <= part.size() || n[0] < 1 || n[1] < 1 || n[2] < 1)
      throw InputError(fmt::format("--gpu-memory: '{}' is not SERVERSxGPUSxMIB (e.g. 4x8x81920)", part));
    for (long long i = 0; i < n[0]; ++i) c.servers.push_back(ServerSpec{static_cast<int>(n[1]), n[2], {}});
    pos = comma + 1;
  }
  return c;
}

namespace {
int devices_of(const ServerSpec& s) { return s.devices.empty() ? s.gpus : static_cast<int>(s.devices.size()); }
}  // namespace

int ClusterSpec::total_gpus() const {
  int n = 0;
  for (const auto& s : servers) n += devices_of(s);
  return n;
}

int ClusterSpec::max_gpus_per_server() const {
  int n = 0;
  for (const auto& s : servers) n = std::max(n, devices_of(s));
  return n;
}

ClusterSpec ClusterSpec::with_mig(const std::string& layout) const {
  // Per-GPU lists of profile names; each GPU's memory names its model (core/mig_models.h),
  // whose table gives the instances' real memory and SMs and says which layouts exist.
  std::vector<std::vector<std::string>> lists;
  std::size_t pos = 0;
  while (pos <= layout.size()) {
    const std::size_t semi = std::min(layout.find(';', pos), layout.size());
    std::vector<std::string> list;
    std::size_t p = pos;
    while (p <= semi) {
      const std::size_t comma = std::min(layout.find(',', p), semi);
      list.push_back(layout.substr(p, comma - p));
      p = comma + 1;
    }
    lists.push_back(std::move(list));
    pos = semi + 1;
  }
  ClusterSpec out;
  out.servers.clear();
  std::size_t next = 0;
  for (const auto& s : servers) {
    const mig::Model* model = mig::model_for_memory(s.gpu_memory_mib);
    if (!model)
      throw InputError(fmt::format("--sharing mig: a GPU of {} MiB is no MIG-capable model aegis knows ({})",
                                   s.gpu_memory_mib, mig::known_models()));
    ServerSpec m = s;
    m.devices.clear();
    for (int g = 0; g < s.gpus; ++g) {
      const auto& list = lists[next++ % lists.size()];
      if (const std::string why = mig::check_layout(*model, list); !why.empty())
        throw InputError("--sharing mig: " + why);
      for (const auto& name : list) {
        const mig::Profile& p = *mig::find_profile(*model, name);
        m.devices.push_back({p.memory_mib, mig::sm_share(*model, p), name});
      }
    }
    out.servers.push_back(std::move(m));
  }
  return out;
}

std::string ClusterSpec::describe() const {
  std::string out;
  if (!servers.empty() && !servers.front().devices.empty()) {
    std::string profiles;
    for (const auto& d : servers.front().devices)
      profiles += (profiles.empty() ? "" : ",") + d.profile;
    return fmt::format("{} server(s), {} MIG instances ({} on the first server)", servers.size(), total_gpus(), profiles);
  }
  for (std::size_t i = 0; i < servers.size();) {
    std::size_t k = i;
    while (k < servers.size() && servers[k].gpus == servers[i].gpus &&
           servers[k].gpu_memory_mib == servers[i].gpu_memory_mib)
      ++k;
    out += fmt::format("{}{} x {} x {} MiB", out.empty() ? "" : " + ", k - i, servers[i].gpus, servers[i].gpu_memory_mib);
    i = k;
  }
  return out;
}

}  // namespace aegis
