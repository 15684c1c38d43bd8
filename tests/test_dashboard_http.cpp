// The dashboard's request heads and replies (src/runtime/daemon/dashboard_http.h): where a
// head ends, what is refused and with which status, and that every reply closes.
#include <gtest/gtest.h>

#include "runtime/daemon/dashboard_http.h"

namespace aegis::dashboard_http {
namespace {

TEST(DashboardHttp, HeadEndsAtItsBlankLine) {
  EXPECT_EQ(head_length("GET / HTTP/1.1\r\nHost: a\r\n"), 0u);  // still coming (a slow client)
  EXPECT_EQ(head_length("GET / HTTP/1.1\r\nHost: a\r\n\r\nextra"), 27u);
  EXPECT_EQ(head_length("GET / HTTP/1.0\n\n"), 16u);
}

TEST(DashboardHttp, ParsesPathAndQueryAndRefusesTheRest) {
  const auto r = parse_head("GET /api/history?since=12.5&x=%41+b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(r.error, 0);
  EXPECT_EQ(r.path, "/api/history");
  EXPECT_EQ(r.query.at("since"), "12.5");
  EXPECT_EQ(r.query.at("x"), "A b");
  EXPECT_EQ(parse_head("HEAD / HTTP/1.1\r\n\r\n").error, 0);
  EXPECT_EQ(parse_head("POST /api/queue HTTP/1.1\r\n\r\n").error, 405);
  EXPECT_EQ(parse_head("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n").error, 413);
  EXPECT_EQ(parse_head("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").error, 413);
  EXPECT_EQ(parse_head("GET / HTTP/2\r\n\r\n").error, 505);
  EXPECT_EQ(parse_head("GET /\r\n\r\n").error, 400);
  EXPECT_EQ(parse_head("GET http://x/ HTTP/1.1\r\n\r\n").error, 400);
  EXPECT_EQ(parse_head("GET / HTTP/1.1\r\nno colon\r\n\r\n").error, 400);
}

TEST(DashboardHttp, RepliesCloseAndCarryTheSecurityHeaders) {
  const std::string r = format_reply(200, "application/json", "{}", false);
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  for (const char* h : {"Connection: close\r\n", "Content-Length: 2\r\n", "X-Content-Type-Options: nosniff\r\n",
                        "Cache-Control: no-store\r\n", "Content-Security-Policy: default-src 'none';"})
    EXPECT_NE(r.find(h), std::string::npos) << h;
  EXPECT_EQ(r.substr(r.size() - 6), "\r\n\r\n{}");
  const std::string head = format_reply(200, "text/html", "<html>", true);  // HEAD: the length, no body
  EXPECT_NE(head.find("Content-Length: 6\r\n"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  EXPECT_EQ(error_json("a \"b\"\n"), "{\"ok\":false,\"error\":\"a \\\"b\\\"\"}");
}

}  // namespace
}  // namespace aegis::dashboard_http
