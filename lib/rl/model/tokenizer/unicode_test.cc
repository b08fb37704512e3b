#include "rl/model/tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace rl::tokenizer {
namespace {

TEST(Utf8LossyTest, ReplacesEachMaximalInvalidSubpartOnce) {
  EXPECT_EQ(Utf8Lossy("ok"), "ok");
  // A truncated 3-byte sequence is one replacement; a stray continuation byte is one each.
  EXPECT_EQ(Utf8Lossy("a\xE4\xBD"), "a\xEF\xBF\xBD");
  EXPECT_EQ(Utf8Lossy("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // E0 80 is not a valid start (overlong): E0 alone, then 80 alone.
  EXPECT_EQ(Utf8Lossy("\xE0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // A surrogate (ED A0 80) is three replacements; F4 90 is past U+10FFFF.
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(Utf8Test, FindsTheFirstInvalidByte) {
  EXPECT_EQ(FindInvalidUtf8("h\xC3\xA9llo"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xC3"), 2u);
  EXPECT_EQ(FindInvalidUtf8("abc\xFF"), 3u);
  EXPECT_EQ(FindInvalidUtf8("\xC0\xAF"), 0u);  // overlong '/'
}

TEST(ByteLevelTest, MapsEveryByteToADistinctCharacterAndBack) {
  EXPECT_EQ(ByteToUnicode(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(ByteToUnicode('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(ByteToUnicode('a'), "a");
  for (int b = 0; b < 256; ++b) {
    size_t pos = 0;
    const std::string& s = ByteToUnicode(static_cast<uint8_t>(b));
    EXPECT_EQ(UnicodeToByte(NextCodePoint(s, &pos)), b);
  }
  EXPECT_EQ(UnicodeToByte(U' '), -1);
  EXPECT_EQ(UnicodeToByte(0x4F60), -1);
}

TEST(NormalizeTest, NfcComposesCombiningMarks) {
  auto nfc = Normalize(NormalForm::kNfc, "e\xCC\x81");  // e + U+0301
  ASSERT_TRUE(nfc.ok());
  EXPECT_EQ(*nfc, "\xC3\xA9");  // é
  auto nfd = Normalize(NormalForm::kNfd, "\xC3\xA9");
  ASSERT_TRUE(nfd.ok());
  EXPECT_EQ(*nfd, "e\xCC\x81");
  EXPECT_EQ(*Normalize(NormalForm::kNfc, "\xE2\x84\xA6"), "\xCE\xA9");  // Ohm sign -> Omega
}

TEST(CharClassTest, FollowsRustCharMethods) {
  EXPECT_TRUE(IsAlphanumeric(U'a'));
  EXPECT_TRUE(IsAlphanumeric(0x4F60));  // 你
  EXPECT_TRUE(IsAlphanumeric(U'7'));
  EXPECT_TRUE(IsAlphanumeric(0x00BD));  // ½ is numeric (No)
  EXPECT_FALSE(IsAlphanumeric(U'_'));
  EXPECT_TRUE(IsWhitespace(0x3000));
  EXPECT_TRUE(IsWhitespace(0x0085));
  EXPECT_FALSE(IsWhitespace(0x200B));  // zero width space is not White_Space
}

}  // namespace
}  // namespace rl::tokenizer
