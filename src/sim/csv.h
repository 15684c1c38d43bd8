// A small RFC 4180 CSV reader that remembers where each record came from, so that every
// error can name the file, the line and the field. Quoted fields may hold commas,
// doubled quotes and newlines. Blank lines are skipped.
#pragma once
#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aegis {

// An input problem, already formatted as one line: "file:line: field 'x': what".
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CsvReader {
 public:
  // Reads the header from `in`. Throws InputError if the input is empty.
  CsvReader(std::istream& in, std::string file_name);
  // Opens `path`; throws InputError if it cannot be read.
  static CsvReader open(const std::string& path);

  // Advances to the next record; false at the end. Throws InputError on a malformed
  // record (unterminated quote, wrong number of fields).
  bool next();

  // Makes `fields` the current record, found at `line` by a caller that split the text
  // itself (a fast path that reads only the rows it needs). Throws InputError on a wrong
  // number of fields, as next() does.
  void set_record(std::vector<std::string>&& fields, std::size_t line);
  std::vector<std::string>& record_storage() { return row_; }  // reuse its strings

  bool has_column(std::string_view name) const;
  const std::vector<std::string>& header() const { return header_; }

  // The current record's field in column `name` (InputError if the column is missing).
  const std::string& field(std::string_view name) const;
  // Typed accessors; empty text gives nullopt; malformed text throws InputError
  // naming file, line and field.
  std::optional<double> opt_double(std::string_view name) const;
  std::optional<std::int64_t> opt_int(std::string_view name) const;
  double get_double(std::string_view name) const;    // required
  std::int64_t get_int(std::string_view name) const;  // required
  const std::string& get_text(std::string_view name) const;  // required, non-empty

  std::size_t line() const { return line_; }  // line where the current record starts
  const std::string& file() const { return file_; }
  // "file:line: field 'name': " prefix for messages about the current record.
  [[noreturn]] void fail(std::string_view field, std::string_view what) const;

 private:
  bool read_record(std::vector<std::string>& out);
  std::size_t column(std::string_view name) const;

  std::istream* in_;
  std::unique_ptr<std::istream> owned_;
  std::string file_;
  std::vector<std::string> header_;
  std::vector<std::string> row_;
  std::size_t line_ = 0;       // line of the current record
  std::size_t next_line_ = 1;  // line the reader is at
};

}  // namespace aegis
