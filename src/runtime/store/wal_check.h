// Issue 33 item 6: whether the database's write-ahead log was lost while nobody had it
// open. SQLite opens a WAL database whose -wal file is gone (deleted, truncated, a disk
// fault) without a word, and every commit since the last checkpoint is silently undone.
// Its -shm (the WAL index, https://www.sqlite.org/walformat.html) still says how many WAL
// frames were committed and how many of them the checkpoint copied: read it before SQLite
// does (its recovery rebuilds it from the -wal that is left).
#pragma once
#include <optional>
#include <string>

namespace aegis {

// One line saying what was lost ("aegis.db-wal is missing: 37 committed pages not yet in
// aegis.db are gone"), or nullopt: no -shm, an index that was never initialised or is not
// one this code knows, or every committed frame is in the database or in the -wal.
std::optional<std::string> lost_wal(const std::string& db_path);

}  // namespace aegis
