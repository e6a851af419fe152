// printable() and valid_utf8() against expectations written out by hand from RFC 3629: what a
// dump-derived name may never do to a report (forge a line, drive the terminal, stop the JSON
// writer), and what must pass through untouched.
#include "certify/report/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace ncert::certify {
namespace {

TEST(Printable, PlainAndValidUtf8PassUnchanged) {
  EXPECT_EQ(printable("projections/attn_qkv/identity"), "projections/attn_qkv/identity");
  EXPECT_EQ(printable("µ 2·K ≤ 5120 𝜀"), "µ 2·K ≤ 5120 𝜀");  // 2-, 3- and 4-byte sequences
  EXPECT_EQ(printable("a\\b"), "a\\b");
}

TEST(Printable, ControlCharactersCannotForgeALineOrReachTheTerminal) {
  const std::string forged = "a\nPASS  schema  fake\x1b[2J";
  const std::string out = printable(forged);
  EXPECT_EQ(out, "a\\nPASS  schema  fake\\x1b[2J");
  EXPECT_EQ(out.find('\n'), std::string::npos);
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_EQ(printable(std::string("t\tr\rz\0x\x7f", 8)), "t\\tr\\rz\\x00x\\x7f");
  EXPECT_EQ(printable("c1 \xc2\x9b[31m"), "c1 \\xc2\\x9b[31m");  // U+009B, the 8-bit CSI
}

TEST(Printable, InvalidUtf8BecomesHexNeverDropped) {
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(printable("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");           // overlong, 3 bytes
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(printable("ok\xe2\x82"), "ok\\xe2\\x82");                // truncated at the end
}

TEST(ValidUtf8, RepairsBytesButLeavesControlsToTheJsonWriter) {
  EXPECT_EQ(valid_utf8("a\nb\x1b"), "a\nb\x1b");
  EXPECT_EQ(valid_utf8("name\xff"), "name\\xff");
  EXPECT_EQ(valid_utf8("€"), "€");
}

}  // namespace
}  // namespace ncert::certify
