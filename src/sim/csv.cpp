#include "sim/csv.h"

#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fstream>

namespace aegis {

CsvReader::CsvReader(std::istream& in, std::string file_name) : in_(&in), file_(std::move(file_name)) {
  if (!read_record(header_)) throw InputError(fmt::format("{}: empty file, expected a CSV header", file_));
  for (auto& h : header_) {
    while (!h.empty() && (h.back() == ' ' || h.back() == '\r')) h.pop_back();
  }
  // A UTF-8 byte-order mark is tolerated on the first column name.
  if (!header_.empty() && header_[0].rfind("\xEF\xBB\xBF", 0) == 0) header_[0].erase(0, 3);
}

CsvReader CsvReader::open(const std::string& path) {
  auto f = std::make_unique<std::ifstream>(path);
  if (!*f) throw InputError(fmt::format("{}: cannot open file", path));
  CsvReader r(*f, path);
  r.owned_ = std::move(f);
  return r;
}

bool CsvReader::read_record(std::vector<std::string>& out) {
  out.clear();
  std::string line;
  // Skip blank lines.
  while (true) {
    if (!std::getline(*in_, line)) return false;
    line_ = next_line_++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) break;
  }
  std::string cur;
  bool quoted = false;
  std::size_t i = 0;
  while (true) {
    if (i >= line.size()) {
      if (quoted) {
        std::string more;
        if (!std::getline(*in_, more))
          throw InputError(fmt::format("{}:{}: unterminated quoted field", file_, line_));
        ++next_line_;
        if (!more.empty() && more.back() == '\r') more.pop_back();
        cur += '\n';
        line = std::move(more);
        i = 0;
        continue;
      }
      out.push_back(std::move(cur));
      return true;
    }
    if (!quoted) {
      // A run of plain characters goes in at once.
      std::size_t j = i;
      while (j < line.size() && line[j] != ',' && line[j] != '"') ++j;
      if (j > i) {
        cur.append(line, i, j - i);
        i = j;
        continue;
      }
    }
    const char c = line[i++];
    if (quoted) {
      if (c == '"') {
        if (i < line.size() && line[i] == '"') { cur += '"'; ++i; }
        else quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
}

bool CsvReader::next() {
  if (!read_record(row_)) return false;
  if (row_.size() != header_.size())
    throw InputError(fmt::format("{}:{}: expected {} fields as in the header, found {}", file_, line_,
                                 header_.size(), row_.size()));
  return true;
}

void CsvReader::set_record(std::vector<std::string>&& fields, std::size_t line) {
  row_ = std::move(fields);
  line_ = line;
  if (row_.size() != header_.size())
    throw InputError(fmt::format("{}:{}: expected {} fields as in the header, found {}", file_, line_,
                                 header_.size(), row_.size()));
}

bool CsvReader::has_column(std::string_view name) const {
  for (const auto& h : header_)
    if (h == name) return true;
  return false;
}

std::size_t CsvReader::column(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name) return i;
  throw InputError(fmt::format("{}:1: missing column '{}'", file_, name));
}

void CsvReader::fail(std::string_view field, std::string_view what) const {
  throw InputError(fmt::format("{}:{}: field '{}': {}", file_, line_, field, what));
}

const std::string& CsvReader::field(std::string_view name) const { return row_[column(name)]; }

std::optional<double> CsvReader::opt_double(std::string_view name) const {
  std::string_view t = field(name);
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  if (t.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v))
    fail(name, fmt::format("expected a number, got '{}'", t));
  return v;
}

std::optional<std::int64_t> CsvReader::opt_int(std::string_view name) const {
  auto v = opt_double(name);
  if (!v) return std::nullopt;
  if (*v != std::floor(*v) || std::fabs(*v) > 9e15)
    fail(name, fmt::format("expected a whole number, got '{}'", field(name)));
  return static_cast<std::int64_t>(*v);
}

double CsvReader::get_double(std::string_view name) const {
  auto v = opt_double(name);
  if (!v) fail(name, "missing value");
  return *v;
}

std::int64_t CsvReader::get_int(std::string_view name) const {
  auto v = opt_int(name);
  if (!v) fail(name, "missing value");
  return *v;
}

const std::string& CsvReader::get_text(std::string_view name) const {
  const auto& s = field(name);
  if (s.empty()) fail(name, "missing value");
  return s;
}

}  // namespace aegis
