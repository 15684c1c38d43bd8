// Text that almost every record leaves empty (a job's stop reason: a million results,
// a handful stopped). One pointer, null when empty; set text lives in its own heap copy.
// A std::string would spend 32 bytes of every record on it.
//
// Contract: reads as a const std::string& (empty when unset); copies copy the text;
// compares and prints as its text.
#pragma once
#include <fmt/format.h>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace aegis {

class RareText {
 public:
  RareText() = default;
  RareText(std::string_view text) { *this = text; }  // NOLINT(google-explicit-constructor): a string would convert
  RareText(const std::string& text) : RareText(std::string_view(text)) {}  // NOLINT
  RareText(const char* text) : RareText(std::string_view(text)) {}         // NOLINT
  RareText(const RareText& o) : RareText(o.str()) {}
  RareText(RareText&&) noexcept = default;
  RareText& operator=(const RareText& o) {
    if (this != &o) *this = std::string_view(o.str());
    return *this;
  }
  RareText& operator=(RareText&&) noexcept = default;
  RareText& operator=(std::string_view text) {
    text_ = text.empty() ? nullptr : std::make_unique<std::string>(text);
    return *this;
  }
  RareText& operator=(const std::string& text) { return *this = std::string_view(text); }
  RareText& operator=(const char* text) { return *this = std::string_view(text); }

  const std::string& str() const { return text_ ? *text_ : empty_text(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads as the text
  bool empty() const { return !text_; }

  friend bool operator==(const RareText& a, const RareText& b) { return a.str() == b.str(); }
  friend bool operator==(const RareText& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const RareText& a, const char* b) { return a.str() == b; }
  friend std::ostream& operator<<(std::ostream& out, const RareText& t) { return out << t.str(); }

 private:
  static const std::string& empty_text() {
    static const std::string kEmpty;
    return kEmpty;
  }
  std::unique_ptr<std::string> text_;
};

}  // namespace aegis

template <>
struct fmt::formatter<aegis::RareText> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(const aegis::RareText& t, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(t.str(), ctx);
  }
};
