// parse_job_spec_yaml on arbitrary bytes (specs come from users' files).
#include <cstddef>
#include <cstdint>

#include "check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto result = aegis::api::parse_job_spec_yaml({reinterpret_cast<const char*>(data), size});
  if (const auto* e = std::get_if<aegis::api::ParseError>(&result)) {
    aegis::fuzz::check_error(*e);
  } else {
    aegis::fuzz::check_job(std::get<aegis::api::JobRequest>(result));
  }
  return 0;
}
