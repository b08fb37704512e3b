#include "rl/model/tokenizer.h"

#include <gtest/gtest.h>

namespace rl::model {
namespace {

TEST(CharTokenizerTest, RoundTripsArithmetic) {
  CharTokenizer tok;
  auto ids = tok.Encode("12+345=357");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->size(), 10u);
  EXPECT_EQ((*ids)[0], 4);   // '1'
  EXPECT_EQ((*ids)[2], 13);  // '+'
  auto text = tok.Decode(*ids);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "12+345=357");
}

TEST(CharTokenizerTest, SpecialTokensAreDistinctAndSkippedByDecode) {
  CharTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 15);
  EXPECT_NE(tok.pad_id(), tok.bos_id());
  EXPECT_NE(tok.bos_id(), tok.eos_id());
  auto text = tok.Decode({tok.bos_id(), 3, 14, 3, tok.eos_id(), tok.pad_id()});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "0=0");
}

TEST(CharTokenizerTest, UnknownCharacterIsDataError) {
  CharTokenizer tok;
  auto ids = tok.Encode("1+x");
  EXPECT_EQ(ids.status().code(), Code::kDataError);
  EXPECT_NE(ids.status().message().find("'x' at offset 2"), std::string::npos);
  EXPECT_EQ(tok.Encode("\xff").status().code(), Code::kDataError);
}

TEST(CharTokenizerTest, IdOutsideVocabularyIsDataError) {
  CharTokenizer tok;
  EXPECT_EQ(tok.Decode({3, 15}).status().code(), Code::kDataError);
  EXPECT_EQ(tok.Decode({-1}).status().code(), Code::kDataError);
}

}  // namespace
}  // namespace rl::model
