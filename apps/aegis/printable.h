// Text from aegisd made safe for a terminal: another user's strings (a job's name, command,
// working directory, reasons quoting them) reach this user's screen, so control characters
// are shown as escapes instead of acting (issue 33: clear screen, set title, forged lines).
#pragma once
#include <string>
#include <string_view>

namespace aegis::cli {

// `s` with every C0 control (tab and newline included), DEL and C1 control (U+0080-U+009F,
// in UTF-8) written as \xNN (C1: \u00NN); everything else, other UTF-8 included, as it is.
std::string printable(std::string_view s);

}  // namespace aegis::cli
