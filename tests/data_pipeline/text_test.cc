// The Python-str text rules of data_pipeline/text.h against what CPython
// 3.11 answers for the same strings.
#include "data_pipeline/text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace xlnet::data {
namespace {

TEST(TextTest, PythonWhitespaceSetIsExact) {
  // [c for c in range(0x110000) if chr(c).isspace()] in Python 3.11.
  const std::vector<char32_t> python = {
      0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x1C,   0x1D,   0x1E,
      0x1F,   0x20,   0x85,   0xA0,   0x1680, 0x2000, 0x2001, 0x2002,
      0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
      0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  std::vector<char32_t> ours;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (IsPythonSpace(c)) ours.push_back(c);
  }
  EXPECT_EQ(ours, python);
  // Not whitespace in Python: zero-width space, BOM, Mongolian vowel
  // separator, next line's neighbours.
  for (char32_t c : {0x200B, 0xFEFF, 0x180E, 0x84, 0x86, 0x00}) {
    EXPECT_FALSE(IsPythonSpace(c)) << std::hex << static_cast<uint32_t>(c);
  }
  EXPECT_FALSE(IsPythonSpace(0x110000));
}

TEST(TextTest, SplitStripAndBlank) {
  EXPECT_EQ(SplitPythonWhitespace(" a\tb\u2003c\n"),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(StripPythonWhitespace("\u00a0 x y \u3000"), "x y");
  EXPECT_EQ(StripPythonWhitespace(" \t "), "");
  // "\x1c\x85a\u200bb\x1f".split() == ['a\u200bb']
  EXPECT_EQ(SplitPythonWhitespace("\x1c\u0085a\u200b"
                                  "b\x1f"),
            (std::vector<std::string>{"a\u200b"
                                      "b"}));
  EXPECT_TRUE(SplitPythonWhitespace("").empty());
  EXPECT_TRUE(SplitPythonWhitespace(" \u2028 ").empty());
  EXPECT_EQ(StripPythonWhitespace("\ufeffx\u00a0"), "\ufeffx");
  EXPECT_TRUE(IsPythonBlank(""));
  EXPECT_TRUE(IsPythonBlank(" \t\r\x0b\x0c\x1c\x1d\x1e\x1f\u3000\u00a0"));
  EXPECT_FALSE(IsPythonBlank(" \u200b "));
  EXPECT_FALSE(IsPythonBlank(" .\t"));
}

TEST(TextTest, PythonDigits) {
  EXPECT_TRUE(IsPythonDigit('7'));
  EXPECT_TRUE(IsPythonDigit(0x0663));   // ARABIC-INDIC DIGIT THREE
  EXPECT_TRUE(IsPythonDigit(0x00B2));   // SUPERSCRIPT TWO
  EXPECT_FALSE(IsPythonDigit(0x00BD));  // VULGAR FRACTION ONE HALF
  EXPECT_FALSE(IsPythonDigit('a'));
  EXPECT_FALSE(IsPythonDigit(','));
}

TEST(TextTest, ValidatesUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E"));
  EXPECT_TRUE(IsValidUtf8("\xEF\xBF\xBF"));       // U+FFFF, a noncharacter
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("caf\xC3"));           // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(TextTest, InvalidBytesDecodeAsPythonReplaces) {
  // b'a\xe2\x82b\xffc\xed\xa0\x80'.decode('utf-8', 'replace'): one U+FFFD
  // per maximal ill-formed subsequence.
  EXPECT_EQ(DecodeUtf8("a\xE2\x82"
                       "b\xFF"
                       "c\xED\xA0\x80"),
            U"a\uFFFDb\uFFFDc\uFFFD\uFFFD\uFFFD");
  // Offsets follow the same decoding: "\xE2\x82" is one code point.
  EXPECT_EQ(CodePointOffsets("a\xE2\x82"
                             "b"),
            (std::vector<size_t>{0, 1, 3, 4}));
  EXPECT_EQ(CodePointLength("\xED\xA0\x80"), 3);
  // Invalid bytes are not whitespace; split keeps them as they are.
  EXPECT_EQ(SplitPythonWhitespace("\xFF x"),
            (std::vector<std::string>{"\xFF", "x"}));
  EXPECT_FALSE(IsPythonBlank(" \xFF"));
}

TEST(TextTest, CodePointOffsetsAndSubstrings) {
  const std::string text = "a\u00e9\u20ac\U0001D11E!";  // aé€𝄞!
  EXPECT_EQ(CodePointOffsets(text), (std::vector<size_t>{0, 1, 3, 6, 10, 11}));
  EXPECT_EQ(CodePointOffsets(""), (std::vector<size_t>{0}));
  EXPECT_EQ(CodePointLength(text), 5);
  EXPECT_EQ(SubstrByChars(text, 1, 3), "\u00e9\u20ac");
  EXPECT_EQ(SubstrByChars(text, 3, 99), "\U0001D11E!");
  EXPECT_EQ(SubstrByChars(text, -2, 1), "a");
  EXPECT_EQ(SubstrByChars(text, 4, 2), "");
  size_t pos = 1;
  EXPECT_EQ(NextCodePoint(text, &pos), U'\u00e9');
  EXPECT_EQ(pos, 3u);
  size_t start = 0;
  EXPECT_EQ(LastCodePoint(text, 10, &start), U'\U0001D11E');
  EXPECT_EQ(start, 6u);
  EXPECT_EQ(LastCodePoint(text, 9, &start), kReplacementChar);  // cut
  EXPECT_EQ(LastCodePoint(text, 1, &start), U'a');
  EXPECT_EQ(start, 0u);
}

TEST(TextTest, EncodesUtf8) {
  const std::u32string cps = U"a\u00e9\u20ac\U0001D11E";
  EXPECT_EQ(EncodeUtf8(cps), "a\u00e9\u20ac\U0001D11E");
  EXPECT_EQ(DecodeUtf8(EncodeUtf8(cps)), cps);
  std::string out;
  AppendUtf8(0x10FFFF, &out);
  EXPECT_EQ(out, "\xF4\x8F\xBF\xBF");
}

}  // namespace
}  // namespace xlnet::data
