#include "apps/aegis/printable.h"

#include <fmt/format.h>

namespace aegis::cli {

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      // A C1 control (CSI is U+009B): terminals that read UTF-8 act on these too.
      out += fmt::format("\\u00{:02x}", static_cast<unsigned char>(s[i + 1]));
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace aegis::cli
