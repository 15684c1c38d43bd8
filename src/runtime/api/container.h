// `aegis submit --container IMAGE`: the job's command, run in a podman container as the
// submitting user. The command line is built on the client, so the daemon (root) never
// reads the image name; it runs `podman run` as the user like any other job command.
// `--cgroups=disabled` keeps conmon and the payload in the job's own cgroup, so aegisd
// attributes their GPU processes, records their peak and cancels them (docs/daemon.md).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aegis::api {

inline constexpr std::size_t kMaxImageLength = 255;
inline constexpr const char* kPodman = "/usr/bin/podman";  // Debian's podman

// One line naming --container when `image` is not an image reference podman takes as one
// (registry[:port]/name[:tag][@sha256:digest], lower-case name components; never one
// that podman could read as an option); nullopt when it is.
std::optional<std::string> check_container_image(std::string_view image);

// The argv that runs `command` in `image`, in `workdir` mounted at the same path, with the
// GPU assignment aegisd gives the job at launch (CUDA_VISIBLE_DEVICES and the MPS
// variables, passed through from the job's environment) and, with `cdi_gpus`, the host's
// NVIDIA devices (CDI, nvidia.com/gpu=all; CUDA_VISIBLE_DEVICES picks among them). The
// emulated GPU's variables pass through too, so that a container can use emulated GPUs.
// `image` must have passed check_container_image; a `workdir` podman cannot mount (':'
// or ',') is an error naming --workdir.
std::vector<std::string> container_command(const std::string& image, const std::vector<std::string>& command,
                                           const std::string& workdir, bool cdi_gpus, std::string* error);

// Whether NVIDIA's container toolkit described this host's GPUs for CDI (nvidia-ctk cdi
// generate writes /etc/cdi/nvidia.yaml or /var/run/cdi/nvidia.yaml).
bool host_has_cdi_gpus();

}  // namespace aegis::api
