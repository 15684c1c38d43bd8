#include "sim/workload_name.h"

#include <mutex>
#include <ostream>
#include <set>

namespace aegis {

namespace {

const std::string kEmpty;  // constant-initialised: there before any other static object

const std::string* kept(std::string_view name) {
  if (name.empty()) return &kEmpty;
  // Never freed: names outlive every trace and result that points at them, whatever the
  // order of destruction at exit. Bounded by the distinct names a process reads.
  static std::mutex lock;
  static auto* names = new std::set<std::string, std::less<>>();
  std::lock_guard<std::mutex> hold(lock);
  auto it = names->find(name);
  if (it == names->end()) it = names->emplace(name).first;
  return &*it;
}

}  // namespace

WorkloadName::WorkloadName() : name_(&kEmpty) {}

WorkloadName::WorkloadName(std::string_view name) : name_(kept(name)) {}

std::ostream& operator<<(std::ostream& out, const WorkloadName& name) { return out << name.str(); }

}  // namespace aegis
