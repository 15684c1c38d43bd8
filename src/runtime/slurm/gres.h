// GPU memory as Slurm books it: a count-only generic resource (default name `aegis_mem`)
// counted in bytes, so users write `--gres=aegis_mem:12G` with Slurm's own suffixes
// (K, M, G, T, P: powers of 1024). Pure parsing and formatting, no Slurm calls.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"

namespace aegis::slurm {

// "12G" -> 12884901888; "12000M", "4096", "1.5G" is not Slurm's syntax (empty); empty on
// overflow or anything malformed.
std::optional<std::uint64_t> parse_count(std::string_view text);

// MiB as a count Slurm reads back exactly: "12000M".
std::string mib_count(MiB mib);

// One entry of a GRES list such as Slurm's TresPerNode, "gres:gpu:a100:1,gres:aegis_mem:12G".
struct GresEntry {
  std::string name;   // "aegis_mem"
  std::string type;   // "a100", or ""
  std::string count;  // as written: "12G"
};

// Reads "gres:NAME[:TYPE]:COUNT" or "NAME[:TYPE][:COUNT]" entries (the "gres:" prefix is
// optional; a missing count is 1). Empty entries are skipped; "(null)" is an empty list.
std::vector<GresEntry> parse_gres_list(std::string_view text);

// The list as `scontrol update Gres=` takes it, with `name`'s count set to `count` (added
// when absent), the other entries unchanged.
std::string with_count(const std::vector<GresEntry>& list, const std::string& name, const std::string& count);

// The memory booked under `name`, in MiB (rounded down), if the list books any.
std::optional<MiB> booked_mib(const std::vector<GresEntry>& list, const std::string& name);

}  // namespace aegis::slurm
