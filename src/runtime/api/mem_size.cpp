// Memory sizes as people write them (docs/api.md): a decimal number and a binary unit.
// Computed exactly in integers, rounded up to a whole MiB: "1.1M" is 2 MiB, never 1.
#include <algorithm>
#include <cctype>
#include <cstdint>

#include "runtime/api/detail.h"
#include "runtime/api/request.h"

namespace aegis::api {
namespace {

// Any whole part above this is over 1 PiB in every unit (the smallest is KiB).
constexpr std::uint64_t kMaxWhole = std::uint64_t{1} << 40;
// Nine places keep every product below in 64 bits; nobody sizes memory more finely.
constexpr std::size_t kMaxFractionDigits = 9;

struct Decimal {
  std::uint64_t whole = 0;
  std::uint64_t fraction = 0;      // the digits after the point, as an integer
  std::uint64_t denominator = 1;   // 10 to the number of those digits
};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "12" or "1.5": digits on both sides of an optional point; empty when malformed or
// too big to matter.
std::optional<Decimal> parse_decimal(std::string_view text) {
  const std::size_t point = text.find('.');
  const std::string_view whole = text.substr(0, point);
  std::string_view fraction = point == std::string_view::npos ? std::string_view{} : text.substr(point + 1);
  if (!all_digits(whole) || (point != std::string_view::npos && !all_digits(fraction))) return std::nullopt;
  fraction = fraction.substr(0, fraction.find_last_not_of('0') + 1);  // "1.50" is "1.5"
  if (fraction.size() > kMaxFractionDigits) return std::nullopt;
  Decimal d;
  for (char c : whole) {
    d.whole = d.whole * 10 + static_cast<std::uint64_t>(c - '0');
    if (d.whole > kMaxWhole) return std::nullopt;
  }
  for (char c : fraction) {
    d.fraction = d.fraction * 10 + static_cast<std::uint64_t>(c - '0');
    d.denominator *= 10;
  }
  return d;
}

// The unit's size as a power of 1024 KiB: K 0, M (or none) 1, G 2, T 3, P 4. Each
// accepts the forms K, KB, KiB in any case; all of them are binary.
std::optional<int> unit_power(std::string_view unit) {
  if (unit.empty()) return 1;
  static constexpr std::string_view kPrefixes = "kmgtp";
  const auto prefix = kPrefixes.find(static_cast<char>(std::tolower(static_cast<unsigned char>(unit[0]))));
  if (prefix == std::string_view::npos) return std::nullopt;
  std::string rest(unit.substr(1));
  for (char& c : rest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!rest.empty() && rest != "b" && rest != "ib") return std::nullopt;
  return static_cast<int>(prefix);
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

// ceil(d × 1024^power KiB / 1024) MiB; empty past 1 PiB.
std::optional<std::uint64_t> to_mib(const Decimal& d, int power) {
  constexpr auto kLimit = static_cast<std::uint64_t>(detail::kMaxMemMiB);
  if (power == 0) {  // KiB: rest < 1024 × 10^9, no overflow
    const std::uint64_t rest = (d.whole % 1024) * d.denominator + d.fraction;
    return d.whole / 1024 + ceil_div(rest, 1024 * d.denominator);
  }
  const std::uint64_t per_unit = std::uint64_t{1} << (10 * (power - 1));  // MiB
  if (d.whole > kLimit / per_unit) return std::nullopt;
  // fraction × per_unit < 10^9 × 2^30 < 2^64.
  return d.whole * per_unit + ceil_div(d.fraction * per_unit, d.denominator);
}

}  // namespace

std::optional<MiB> parse_mem_size(std::string_view text) {
  const std::size_t number_end = std::min(text.find_first_not_of("0123456789."), text.size());
  const auto number = parse_decimal(text.substr(0, number_end));
  const auto power = unit_power(text.substr(number_end));
  if (!number || !power) return std::nullopt;
  const auto mib = to_mib(*number, *power);
  if (!mib || *mib < 1 || *mib > static_cast<std::uint64_t>(detail::kMaxMemMiB)) return std::nullopt;
  return static_cast<MiB>(*mib);
}

}  // namespace aegis::api
