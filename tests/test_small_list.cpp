// SmallList (src/core/small_list.h) and RareText (src/sim/rare_text.h): the record fields
// that keep their common case inside the record behave as the std::vector and
// std::string they replaced, in both modes (inline and on the heap).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim/rare_text.h"
#include "core/small_list.h"

namespace aegis {
namespace {

TEST(SmallList, GrowsFromInlineToHeapKeepingOrder) {
  SmallList<int, 4> l;
  EXPECT_TRUE(l.empty());
  std::vector<int> want;
  for (int i = 0; i < 40; ++i) {
    l.push_back(i * 3);
    want.push_back(i * 3);
    ASSERT_EQ(l.size(), want.size());
    EXPECT_EQ(l, want);
    EXPECT_EQ(l.front(), 0);
    EXPECT_EQ(l.back(), i * 3);
  }
  int sum = 0;
  for (int x : l) sum += x;
  EXPECT_EQ(sum, 3 * 39 * 40 / 2);
  EXPECT_THROW((void)l.at(40), std::out_of_range);
}

TEST(SmallList, CopiesAndMovesInBothModes) {
  for (int n : {0, 1, 4, 5, 9}) {
    SmallList<std::string, 2> a;
    for (int i = 0; i < n; ++i) a.push_back(std::string(40, static_cast<char>('a' + i)));  // past SSO
    SmallList<std::string, 2> copy = a;
    EXPECT_EQ(copy, a) << n;
    SmallList<std::string, 2> moved = std::move(copy);
    EXPECT_EQ(moved, a) << n;
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
    copy = moved;
    EXPECT_EQ(copy, a) << n;
    SmallList<std::string, 2> other{"x"};
    other = std::move(moved);
    EXPECT_EQ(other, a) << n;
    other = {"p", "q", "r"};
    EXPECT_EQ(other, (std::vector<std::string>{"p", "q", "r"})) << n;
    other.clear();
    EXPECT_TRUE(other.empty());
  }
}

TEST(SmallList, GrowsWithAnArgumentThatIsItsOwnElement) {
  SmallList<std::string, 1> l{std::string(40, 'z')};
  l.push_back(l.back());  // the element is copied before the list moves to the heap
  l.push_back(l.front());
  EXPECT_EQ(l, (std::vector<std::string>(3, std::string(40, 'z'))));
}

TEST(SmallList, PopsAndReadsBackwardsInBothModes) {
  for (int n : {1, 2, 3, 6}) {
    SmallList<std::string, 2> l;
    std::vector<std::string> want;
    for (int i = 0; i < n; ++i) {
      l.push_back(std::string(40, static_cast<char>('a' + i)));
      want.push_back(l.back());
    }
    EXPECT_TRUE(std::equal(l.rbegin(), l.rend(), want.rbegin(), want.rend())) << n;
    l.pop_back();
    want.pop_back();
    EXPECT_EQ(l, want) << n;
    l.push_back("again");  // a heap block is kept by pop_back and used again
    want.push_back("again");
    EXPECT_EQ(l, want) << n;
  }
}

TEST(RareText, ReadsAsItsTextAndCopiesIt) {
  RareText t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.str(), "");
  t = std::string("stopped: too large");
  EXPECT_EQ(t, "stopped: too large");
  RareText u = t;
  t = "";
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(u, "stopped: too large");
  EXPECT_EQ(fmt::format("[{}]", u), "[stopped: too large]");
  const std::string& s = u;
  EXPECT_EQ(s.size(), 18u);
}

}  // namespace
}  // namespace aegis
