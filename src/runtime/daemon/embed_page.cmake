# Writes OUT, a C++ file defining aegis::dashboard_page(), from the page IN (run at build
# time, so that editing dashboard.html rebuilds aegisd). The raw string's delimiter must
# not appear in the page.
file(READ ${IN} page)
string(FIND "${page}" ")aegis_page\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )aegis_page\"")
endif()
file(WRITE ${OUT} "// Generated from dashboard.html by embed_page.cmake; do not edit.\n#include <string>\n\nnamespace aegis {\n\nconst std::string& dashboard_page() {\n  static const std::string page = R\"aegis_page(${page})aegis_page\";\n  return page;\n}\n\n}  // namespace aegis\n")
