#include "runtime/slurm/give_back.h"

#include <algorithm>
#include <fmt/format.h>

#include "runtime/slurm/gres.h"

namespace aegis::slurm {

bool marked_alone(std::string_view comment) { return comment.find(kAloneMarker) != std::string_view::npos; }

GiveBackPlan plan_give_back(const GiveBackInput& in) {
  GiveBackPlan p;
  if (!in.job.requeue_allowed) {
    p.why_not = "Slurm will not requeue it (submitted with --no-requeue, or JobRequeue=0)";
    return p;
  }
  std::vector<std::string> exclude = in.excluded;
  if (std::find(exclude.begin(), exclude.end(), in.this_node) == exclude.end()) exclude.push_back(in.this_node);
  const bool elsewhere = std::any_of(in.partition_nodes.begin(), in.partition_nodes.end(), [&](const std::string& n) {
    return std::find(exclude.begin(), exclude.end(), n) == exclude.end();
  });
  if (!elsewhere) {
    p.why_not = fmt::format("partition {} has no node it has not waited on already", in.job.partition);
    return p;
  }
  p.go = true;
  for (const auto& n : exclude) p.exclude += (p.exclude.empty() ? "" : ",") + n;
  p.gres = with_count(parse_gres_list(in.job.tres_per_node), in.gres_name,
                      mib_count(in.whole_gpu_mib * std::max(1, in.gpus)));
  p.comment = in.comment;
  if (!marked_alone(p.comment))
    p.comment += fmt::format("{}{} ({} OOMs, then waited alone on {})", p.comment.empty() ? "" : "; ", kAloneMarker,
                             in.oom_count, in.this_node);
  return p;
}

}  // namespace aegis::slurm
