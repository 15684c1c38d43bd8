#include "runtime/api/container.h"

#include <filesystem>
#include <regex>

namespace aegis::api {

namespace {

// The distribution reference grammar (github.com/distribution/reference), in parts.
const std::regex& name_component() {
  static const std::regex r("[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*");
  return r;
}
const std::regex& registry() {
  static const std::regex r("(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
                            "(?::[0-9]{1,5})?");
  return r;
}

std::string bad(std::string_view image, const std::string& why) {
  std::string shown(image.substr(0, 80));
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return "--container: '" + shown + (image.size() > 80 ? "...'" : "'") + " is not an image reference (" + why + ")";
}

}  // namespace

std::optional<std::string> check_container_image(std::string_view image) {
  if (image.empty()) return bad(image, "empty");
  if (image.size() > kMaxImageLength) return bad(image, "longer than 255 characters");
  std::string rest(image);
  if (const auto at = rest.find('@'); at != std::string::npos) {
    static const std::regex digest("sha256:[a-f0-9]{64}");
    if (!std::regex_match(rest.substr(at + 1), digest)) return bad(image, "a digest is sha256: and 64 hex digits");
    rest.resize(at);
  }
  const auto slash = rest.rfind('/');
  if (const auto colon = rest.rfind(':'); colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    static const std::regex tag("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
    if (!std::regex_match(rest.substr(colon + 1), tag)) return bad(image, "a tag is up to 128 of A-Z a-z 0-9 _ . -");
    rest.resize(colon);
  }
  // The first component is a registry when it looks like a host (a dot, a port, localhost).
  std::size_t from = 0;
  if (const auto first = rest.find('/'); first != std::string::npos) {
    const std::string host = rest.substr(0, first);
    if (host.find_first_of(".:") != std::string::npos || host == "localhost") {
      if (!std::regex_match(host, registry())) return bad(image, "a registry is a host name with an optional port");
      from = first + 1;
    }
  }
  for (std::size_t i = from;;) {
    const auto end = rest.find('/', i);
    const std::string part = rest.substr(i, end == std::string::npos ? std::string::npos : end - i);
    if (!std::regex_match(part, name_component()))
      return bad(image, "name components are lower-case letters and digits, joined by . _ or -");
    if (end == std::string::npos) break;
    i = end + 1;
  }
  return std::nullopt;
}

std::vector<std::string> container_command(const std::string& image, const std::vector<std::string>& command,
                                           const std::string& workdir, bool cdi_gpus, std::string* error) {
  if (workdir.find_first_of(":,") != std::string::npos) {
    *error = "--workdir: '" + workdir + "' cannot be mounted into a container (it holds ':' or ',')";
    return {};
  }
  std::vector<std::string> argv = {kPodman, "run", "--rm",
                                   // No cgroup of its own: conmon and the payload stay in the job's cgroup.
                                   "--cgroups=disabled",
                                   // Its files are the user's inside as outside.
                                   "--userns=keep-id",
                                   "--volume", workdir + ":" + workdir, "--workdir", workdir};
  if (cdi_gpus) {
    argv.push_back("--device");
    argv.push_back("nvidia.com/gpu=all");
  }
  // The variables aegisd sets at launch, passed through (a name alone: the value the job has).
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "AEGIS_EMULATED_STATE", "AEGIS_EMULATED_GPUS"}) {
    argv.push_back("--env");
    argv.push_back(name);
  }
  argv.push_back(image);
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

bool host_has_cdi_gpus() {
  for (const char* spec : {"/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml"})
    if (std::filesystem::exists(spec)) return true;
  return false;
}

}  // namespace aegis::api
