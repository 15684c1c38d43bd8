#include "mps_client.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

namespace aegis::fakejob {

namespace {

// "1024M", "2G", "512MB", "1.5G": MiB (rounded down), or nullopt.
std::optional<MiB> parse_size(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  std::string_view unit(end, static_cast<std::size_t>(s.data() + s.size() - end));
  if (ec != std::errc{} || !std::isfinite(v) || v < 0) return std::nullopt;
  if (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b')) unit.remove_suffix(1);
  if (unit.size() != 1) return std::nullopt;
  double mib = 0;
  switch (unit[0]) {
    case 'K': case 'k': mib = v / 1024; break;
    case 'M': case 'm': mib = v; break;
    case 'G': case 'g': mib = v * 1024; break;
    case 'T': case 't': mib = v * 1024 * 1024; break;
    default: return std::nullopt;
  }
  if (mib > 1e12) return std::nullopt;
  return static_cast<MiB>(std::floor(mib));
}

std::optional<double> parse_percentage(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || !(v > 0 && v <= 100)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::vector<std::optional<MiB>>> parse_mem_limits(std::string_view text, int devices,
                                                                 std::string* error) {
  std::vector<std::optional<MiB>> out(static_cast<std::size_t>(devices));
  auto fail = [&](std::string_view part) {
    *error = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: '" + std::string(part) +
             "' is not a limit (write 0=1024M,1=2G per device, or 1024M for all; units K, M, G)";
    return std::nullopt;
  };
  if (text.find('=') == std::string_view::npos) {  // one limit for every device
    const auto mib = parse_size(text);
    if (!mib) return fail(text);
    for (auto& l : out) l = mib;
    return out;
  }
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto eq = part.find('=');
    if (eq == std::string_view::npos) return fail(part);
    int ordinal = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + eq, ordinal);
    const auto mib = parse_size(part.substr(eq + 1));
    if (ec != std::errc{} || end != part.data() + eq || ordinal < 0 || !mib) return fail(part);
    if (ordinal < devices) out[static_cast<std::size_t>(ordinal)] = mib;
  }
  return out;
}

bool read_mps_settings(int devices, MpsSettings* out, std::string* error) {
  *out = {};
  out->limits.resize(static_cast<std::size_t>(devices));
  if (const char* v = std::getenv("CUDA_MPS_PIPE_DIRECTORY"); v && *v) out->pipe_dir = v;
  if (const char* v = std::getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); v && *v) {
    auto limits = parse_mem_limits(v, devices, error);
    if (!limits) return false;
    out->limits = std::move(*limits);
  }
  if (const char* v = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"); v && *v) {
    const auto p = parse_percentage(v);
    if (!p) {
      *error = std::string("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: '") + v + "' is not a percentage in (0, 100]";
      return false;
    }
    out->thread_fraction = *p / 100;
  }
  return true;
}

bool connect_mps(const std::string& pipe_dir, std::uint32_t pid) {
  // Non-blocking write-open of a FIFO fails (ENXIO) unless someone has it open to read:
  // a control FIFO left behind by a daemon that died does not count.
  const int fd = ::open((pipe_dir + "/control").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  char line[64];
  const int n = std::snprintf(line, sizeof line, "client %u %u\n", pid, static_cast<unsigned>(getuid()));
  // One short write is atomic on a FIFO.
  const bool ok = write(fd, line, static_cast<std::size_t>(n)) == n;
  close(fd);
  if (!ok) return false;
  // The daemon lets it in (granted.PID) at once, or once another user's server is gone;
  // meanwhile CUDA's first call blocks, as with NVIDIA's daemon. A daemon that goes away
  // (its FIFO without a reader) ends the wait as a failed connection.
  const std::string granted = pipe_dir + "/granted." + std::to_string(pid);
  for (int i = 0; access(granted.c_str(), F_OK) != 0; ++i) {
    if (i % 50 == 49) {
      const int probe = ::open((pipe_dir + "/control").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (probe < 0) return false;
      close(probe);
    }
    usleep(20'000);
  }
  return true;
}

}  // namespace aegis::fakejob
