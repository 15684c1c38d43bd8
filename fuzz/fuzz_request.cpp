// parse_request on arbitrary bytes (the daemon's socket is open to every local user).
#include <cstddef>
#include <cstdint>

#include "check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto result = aegis::api::parse_request({reinterpret_cast<const char*>(data), size});
  if (const auto* e = std::get_if<aegis::api::ParseError>(&result)) {
    aegis::fuzz::check_error(*e);
  } else if (const auto* submit = std::get_if<aegis::api::SubmitRequest>(&std::get<aegis::api::Request>(result))) {
    aegis::fuzz::check_job(submit->job);
  }
  return 0;
}
