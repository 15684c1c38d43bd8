// Job ids are never reused on a host: each job's attempts keep their files (logs, exit
// records) in STATE_DIR/jobs/<id>/<attempt>/, so a new job given an old id would find
// another job's attempt "already running" or show another user's output. When the
// database is lost, the ids already used are read back from the state directory: the
// numeric directories under jobs/, and the watermark file STATE_DIR/id-floor (which
// survives jobs/ being cleaned). The daemon starts with
//   store.reserve_ids_above(highest_job_id_on_disk(state_dir));
// The store itself knows nothing of these files.
#pragma once
#include <string>

#include "core/units.h"

namespace aegis {

// The largest job id found in STATE_DIR/jobs/ (directory names made of digits only;
// anything else, and symbolic links, ignored) and in STATE_DIR/id-floor; 0 when neither
// exists. Throws StoreError (one line) when the state directory cannot be read.
JobId highest_job_id_on_disk(const std::string& state_dir);

// Raises the watermark STATE_DIR/id-floor to `id` (never lowers it), durably: a temporary
// file created O_EXCL|O_NOFOLLOW mode 0600, fsync, rename, fsync of the directory. Throws
// StoreError (disk_full set for ENOSPC).
void record_id_floor(const std::string& state_dir, JobId id);

}  // namespace aegis
