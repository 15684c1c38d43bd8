// How the estimators' model files (JSON) report a bad field: one line, "FIELD: what is
// wrong", thrown as std::runtime_error. Shared by every reader of those files.
#pragma once
#include <stdexcept>
#include <string>

namespace aegis {

[[noreturn]] inline void model_file_error(const std::string& where, const std::string& what) {
  throw std::runtime_error(where + ": " + what);
}

}  // namespace aegis
