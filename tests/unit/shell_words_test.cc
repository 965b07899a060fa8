#include "util/shell_words.h"

#include <gtest/gtest.h>

namespace gpulane {
namespace {

using Words = std::vector<std::string>;

Words Split(std::string_view line) {
  auto words = SplitShellWords(line);
  EXPECT_TRUE(words.ok()) << line << ": " << words.error().message;
  return words ? *words : Words{"<error>"};
}

std::string ErrorOf(std::string_view line) {
  auto words = SplitShellWords(line);
  EXPECT_FALSE(words.ok()) << line;
  return words ? "" : words.error().message;
}

TEST(SplitShellWords, BlanksSeparateWords) {
  EXPECT_EQ(Split("python train.py --lr 3e-4"), (Words{"python", "train.py", "--lr", "3e-4"}));
  EXPECT_EQ(Split("  \tpython\t\ttrain.py  "), (Words{"python", "train.py"}));
  EXPECT_EQ(Split(""), Words{});
  EXPECT_EQ(Split("   "), Words{});
}

TEST(SplitShellWords, SingleQuotesKeepEverything) {
  EXPECT_EQ(Split("echo 'a  b' 'it''s'"), (Words{"echo", "a  b", "its"}));
  EXPECT_EQ(Split(R"(echo '$HOME \n "x" | > ;')"), (Words{"echo", R"($HOME \n "x" | > ;)"}));
  EXPECT_EQ(Split("sh -c 'python a.py > out.txt && echo done'"), (Words{"sh", "-c", "python a.py > out.txt && echo done"}));
}

TEST(SplitShellWords, DoubleQuotesEscapeOnlyTheirFour) {
  EXPECT_EQ(Split(R"(echo "a b" "say \"hi\"" "back\\slash" "\$5" "\`x\`")"),
            (Words{"echo", "a b", R"(say "hi")", R"(back\slash)", "$5", "`x`"}));
  EXPECT_EQ(Split(R"(echo "\n stays \t" "it's")"), (Words{"echo", R"(\n stays \t)", "it's"}));
}

TEST(SplitShellWords, BackslashOutsideQuotesTakesTheNextCharacter) {
  EXPECT_EQ(Split(R"(echo a\ b \$HOME \'q\' \\ \#not)"), (Words{"echo", "a b", "$HOME", "'q'", "\\", "#not"}));
  EXPECT_EQ(Split(R"(echo \|\>\;)"), (Words{"echo", "|>;"}));
}

TEST(SplitShellWords, QuotedAndUnquotedPartsJoinIntoOneWord) {
  EXPECT_EQ(Split(R"(python train.py --name=run'  'one"  "two)"), (Words{"python", "train.py", "--name=run  one  two"}));
  EXPECT_EQ(Split(R"(a"b"'c'd)"), Words{"abcd"});
}

TEST(SplitShellWords, EmptyQuotesMakeEmptyWords) {
  EXPECT_EQ(Split("prog '' \"\" x"), (Words{"prog", "", "", "x"}));
  EXPECT_EQ(Split("''"), Words{""});
}

TEST(SplitShellWords, HashStartsACommentOnlyAtAWordsStart) {
  EXPECT_EQ(Split("# a comment"), Words{});
  EXPECT_EQ(Split("python a.py # seed 1"), (Words{"python", "a.py"}));
  EXPECT_EQ(Split("python a.py --tag=x#1 '#2'"), (Words{"python", "a.py", "--tag=x#1", "#2"}));
}

TEST(SplitShellWords, GlobsAndTildeStayAsWritten) {
  EXPECT_EQ(Split("python x.py data/*.csv model.layers=[1,2] ~model.dropout ?"),
            (Words{"python", "x.py", "data/*.csv", "model.layers=[1,2]", "~model.dropout", "?"}));
}

TEST(SplitShellWords, BytesThatAreNotAsciiPassThrough) {
  EXPECT_EQ(Split("echo d\xc3\xa9j\xc3\xa0 '\xff\xfe'"), (Words{"echo", "d\xc3\xa9j\xc3\xa0", "\xff\xfe"}));
}

TEST(SplitShellWords, UnterminatedQuotesNameTheirColumn) {
  std::string e = ErrorOf("echo 'abc");
  EXPECT_NE(e.find("unterminated single quote (') opened at column 6"), std::string::npos) << e;
  EXPECT_NE(e.find("close it on the same line"), std::string::npos) << e;
  e = ErrorOf(R"(echo "abc \" def)");
  EXPECT_NE(e.find("unterminated double quote (\") opened at column 6"), std::string::npos) << e;
}

TEST(SplitShellWords, ExpansionIsRefusedWithTheFix) {
  std::string e = ErrorOf("python a.py --out $HOME/x");
  EXPECT_NE(e.find("'$' at column 19 would be expanded by a shell"), std::string::npos) << e;
  EXPECT_NE(e.find("sh -c '...'"), std::string::npos) << e;
  EXPECT_NE(ErrorOf(R"(echo "$HOME")").find("'$' at column 7"), std::string::npos);
  EXPECT_NE(ErrorOf("echo `date`").find("'`' at column 6 would be expanded"), std::string::npos);
}

TEST(SplitShellWords, ShellSyntaxIsRefusedWithTheFix) {
  for (const char* line : {"python a.py > out", "a | b", "a && b", "a; b", "a < in", "(a)", "a &"}) {
    const std::string e = ErrorOf(line);
    EXPECT_NE(e.find("is shell syntax, and command lines are not run through one"), std::string::npos) << line << ": " << e;
  }
  EXPECT_NE(ErrorOf("python a.py > out").find("'>' at column 13"), std::string::npos);
}

TEST(SplitShellWords, ABackslashAtTheEndIsNotAContinuation) {
  EXPECT_NE(ErrorOf("python a.py \\").find("a backslash ends the line (column 13)"), std::string::npos);
}

TEST(ParseCommandFile, SkipsBlankAndCommentLinesAndKeepsLineNumbers) {
  auto commands = ParseCommandFile("# sweep\n\npython a.py --lr 1\r\n   \npython a.py --lr 2 # two\n", "c.txt");
  ASSERT_TRUE(commands.ok()) << commands.error().message;
  ASSERT_EQ(commands->size(), 2u);
  EXPECT_EQ((*commands)[0].line, 3);
  EXPECT_EQ((*commands)[0].argv, (Words{"python", "a.py", "--lr", "1"})) << "the CRLF's \\r is dropped";
  EXPECT_EQ((*commands)[1].line, 5);
  EXPECT_EQ((*commands)[1].argv, (Words{"python", "a.py", "--lr", "2"}));
}

TEST(ParseCommandFile, ALastLineWithoutNewlineCounts) {
  auto commands = ParseCommandFile("a\nb", "f");
  ASSERT_TRUE(commands.ok());
  ASSERT_EQ(commands->size(), 2u);
  EXPECT_EQ((*commands)[1].argv, Words{"b"});
}

TEST(ParseCommandFile, TheFirstBadLineIsNamedByFileAndNumber) {
  auto commands = ParseCommandFile("good one\n\nbad 'quote\nbad \"two\n", "sweep.txt");
  ASSERT_FALSE(commands.ok());
  EXPECT_EQ(commands.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(commands.error().message.rfind("sweep.txt:3: unterminated single quote (') opened at column 5", 0), 0u)
      << commands.error().message;
}

TEST(ParseCommandFile, NoCommandsAndNulBytesAreErrors) {
  auto empty = ParseCommandFile("# only\n\n", "f.txt");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("f.txt has no commands"), std::string::npos);
  auto nul = ParseCommandFile(std::string("a\nb\0c\n", 6), "f.txt");
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.error().message.find("f.txt:2: a NUL byte"), std::string::npos) << nul.error().message;
}

TEST(ReadCommandFile, AMissingFileIsNamed) {
  auto missing = ReadCommandFile("/nonexistent/commands.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot read the command file /nonexistent/commands.txt: No such file"),
            std::string::npos)
      << missing.error().message;
  auto directory = ReadCommandFile("/");
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("Is a directory"), std::string::npos) << directory.error().message;
}

}  // namespace
}  // namespace gpulane
