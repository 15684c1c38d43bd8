// The emulated GPU's one integer parser for its specs and device ids: the whole of `s`
// must be the number (no sign tricks, spaces or trailing text).
#pragma once
#include <charconv>
#include <string_view>
#include <system_error>

namespace aegis::emu {

template <class Int>
bool parse_whole_number(std::string_view s, Int* v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc{} && end == s.data() + s.size();
}

}  // namespace aegis::emu
