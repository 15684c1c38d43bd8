// A workload's name as trace jobs and simulation results carry it. Each distinct name is
// kept once for the life of the process (a trace names a few dozen workloads a million
// times), so a copy is one pointer and a million-job run allocates no name at all.
#pragma once
#include <fmt/format.h>
#include <iosfwd>
#include <string>
#include <string_view>

namespace aegis {

class WorkloadName {
 public:
  WorkloadName();  // the empty name
  // Implicit, as a std::string would be: any text becomes (or finds) its kept copy.
  WorkloadName(std::string_view name);  // NOLINT(google-explicit-constructor)
  WorkloadName(const std::string& name) : WorkloadName(std::string_view(name)) {}  // NOLINT
  WorkloadName(const char* name) : WorkloadName(std::string_view(name)) {}         // NOLINT

  const std::string& str() const { return *name_; }
  operator const std::string&() const { return *name_; }  // NOLINT: reads as the text
  bool empty() const { return name_->empty(); }

  // Equal text, equal kept copy: comparing names compares pointers.
  friend bool operator==(const WorkloadName& a, const WorkloadName& b) { return a.name_ == b.name_; }
  // Ordered by text, as the names would sort as strings.
  friend bool operator<(const WorkloadName& a, const WorkloadName& b) { return a.name_ != b.name_ && *a.name_ < *b.name_; }

 private:
  const std::string* name_;
};

std::ostream& operator<<(std::ostream& out, const WorkloadName& name);

}  // namespace aegis

template <>
struct fmt::formatter<aegis::WorkloadName> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(const aegis::WorkloadName& name, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(name.str(), ctx);
  }
};
