// `gpulane share`'s rendering (render/share_table.h): rows through the protocol's JSON and back,
// and the table, heaviest user first, names escaped for the terminal.
#include "render/share_table.h"

#include <gtest/gtest.h>

namespace gpulane {
namespace {

TEST(ShareTable, RowsSurviveTheProtocolAndTheTableListsTheHeaviestFirst) {
  std::vector<sched::UserShare> rows = {{"bob", 1, 0.5, 0, 0, 1}, {"alice", 2, 0.5, 14.2 * 3600, 1, 0.25}};
  auto back = ShareRowsFromJson(ShareRowsToJson(rows));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].user, "alice");
  EXPECT_EQ(back[1].share, 2);
  EXPECT_EQ(back[1].usage_gpu_s, 14.2 * 3600);
  EXPECT_EQ(back[1].factor, 0.25);
  const std::string text = ShareTableText(back, 86400);
  EXPECT_EQ(text,
            "USER                SHARE   SHARE%          USAGE   USAGE%  FAIRSHARE\n"
            "alice                   2     50.0     14.2 GPU-h    100.0      0.250\n"
            "bob                     1     50.0        0 GPU-s      0.0      1.000\n"
            "usage: GPU time decayed with a half-life of 1 d (a --mem job counts its fraction of a GPU's memory); "
            "fair share = 2^(-usage% / share%)\n");
  EXPECT_EQ(ShareTableText({{"\x1b[2Jmallory", 1, 1, 0, 0, 1}}, 3600).find('\x1b'), std::string::npos);
  EXPECT_TRUE(ShareRowsFromJson(nlohmann::json::object()).empty());
}

}  // namespace
}  // namespace gpulane
