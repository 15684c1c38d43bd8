// parse_mem_size on arbitrary bytes, against an independent reading of the same grammar
// in long double: an accepted size is the value rounded up to a MiB, and every
// well-formed size from a fraction of a MiB to just under 1 PiB is accepted.
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "check.h"

namespace {

struct Reference {
  long double mib;
  std::size_t fraction_digits;  // without trailing zeros
};

std::size_t digits_from(std::string_view text, std::size_t i) {
  std::size_t j = i;
  while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
  return j - i;
}

// Digits [. digits], then K, M, G, T or P alone or followed by B or iB, in any case.
std::optional<Reference> reference(std::string_view text) {
  const std::size_t whole = digits_from(text, 0);
  if (whole == 0) return std::nullopt;
  std::size_t end = whole;
  std::string_view fraction;
  if (end < text.size() && text[end] == '.') {
    fraction = text.substr(end + 1, digits_from(text, end + 1));
    if (fraction.empty()) return std::nullopt;
    end += 1 + fraction.size();
  }
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  std::string unit(text.substr(end));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int power = 1;
  if (!unit.empty()) {
    const std::string_view prefixes = "kmgtp";
    const std::string rest = unit.substr(1);
    if (prefixes.find(unit[0]) == std::string_view::npos || (!rest.empty() && rest != "b" && rest != "ib"))
      return std::nullopt;
    power = static_cast<int>(prefixes.find(unit[0]));
  }
  const long double number = std::strtold(std::string(text.substr(0, end)).c_str(), nullptr);
  return Reference{number * std::pow(1024.0L, power - 1), fraction.size()};
}

void check(const std::string& text) {
  constexpr long double kPiB = 1073741824.0L;
  constexpr long double kSlack = 1e-12L;  // long double rounding, relative
  const auto got = aegis::api::parse_mem_size(text);
  const auto ref = reference(text);
  if (got) {
    if (*got < 1 || *got > kPiB) aegis::fuzz::violated("size out of range", text);
    if (!ref) aegis::fuzz::violated("accepted outside the grammar", text);
    const auto mib = static_cast<long double>(*got);
    if (ref->mib > mib * (1 + kSlack) || ref->mib <= (mib - 1) * (1 - kSlack))
      aegis::fuzz::violated("not the value rounded up", text + " -> " + std::to_string(*got));
  } else if (ref && ref->fraction_digits <= 9 && ref->mib > 0 && ref->mib < kPiB - 1) {
    aegis::fuzz::violated("rejected a well-formed size", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
