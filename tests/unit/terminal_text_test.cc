// util/terminal_text.h: what reaches a terminal from other people's text is never an escape sequence.
#include "util/terminal_text.h"

#include <random>

#include <gtest/gtest.h>

#include "util/utf8.h"

namespace gpulane {
namespace {

TEST(EscapeForTerminal, ControlsDelC1AndInvalidBytesAreShownVisibly) {
  // OSC 52 (write the clipboard) ended by BEL, as a hostile job name would carry it.
  EXPECT_EQ(EscapeForTerminal("\x1b]52;c;aGkK\x07"), "\\x1b]52;c;aGkK\\x07");
  EXPECT_EQ(EscapeForTerminal(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeForTerminal("\t\n\r\x7f"), "\\x09\\x0a\\x0d\\x7f");
  // C1 controls as characters (U+009B is CSI on terminals that take 8-bit controls) ...
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b" "2J \xc2\x80 \xc2\x9f"), "\\u009b2J \\u0080 \\u009f");
  // ... and as raw bytes, which are no UTF-8 (a Latin-1 terminal would read 0x9b as CSI).
  EXPECT_EQ(EscapeForTerminal("\x9b" "2J"), "\\x9b2J");
  EXPECT_EQ(EscapeForTerminal("\xff\xfe"), "\\xff\\xfe");
  // Ill-formed UTF-8: each byte on its own (overlong, surrogate, above U+10FFFF, truncated).
  EXPECT_EQ(EscapeForTerminal("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(EscapeForTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(EscapeForTerminal("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(EscapeForTerminal("ok \xe2\x9c"), "ok \\xe2\\x9c");
  EXPECT_EQ(EscapeForTerminal("\xe2\x9c" "a"), "\\xe2\\x9ca");
}

TEST(EscapeForTerminal, PrintableTextIsKeptAsItIs) {
  for (const char* text : {"", "python train.py --lr=3e-4", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80", "\xc2\xa0nbsp",
                           "a\\x1b stays a backslash", "~!@#$%^&*()_+{}|:\"<>?`-=[];',./"})
    EXPECT_EQ(EscapeForTerminal(text), text) << text;
}

// Over random bytes: the result is well-formed UTF-8 without C0, DEL or C1 controls, and escaping
// it again changes nothing.
TEST(EscapeForTerminal, AnyBytesGiveSafeTextAndEscapingIsIdempotent) {
  std::mt19937 rng(13);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 4 == 0 ? 0x80 + rng() % 0x40 : rng() % 256);
    const std::string out = EscapeForTerminal(bytes);
    ASSERT_TRUE(IsValidUtf8(out));
    for (std::size_t k = 0; k < out.size(); ++k) {
      const auto u = static_cast<unsigned char>(out[k]);
      ASSERT_FALSE(u < 0x20 || u == 0x7f) << "control byte in the escape of input " << i;
      ASSERT_FALSE(u == 0xc2 && k + 1 < out.size() && static_cast<unsigned char>(out[k + 1]) <= 0x9f);
    }
    ASSERT_EQ(EscapeForTerminal(out), out);
  }
}

TEST(Utf8, WellFormedAsJsonLibrariesDefineIt) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"));
  for (const char* bad : {"\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf",
                          "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xe2\x82", "\xc3"})
    EXPECT_FALSE(IsValidUtf8(bad)) << EscapeForTerminal(bad);
}

}  // namespace
}  // namespace gpulane
