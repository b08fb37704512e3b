// The lexer's whitespace rules (trim_blocks, lstrip_blocks, -, +) and its errors; the expected
// text is what Jinja2 3.1 renders for the same source (tests/chat/snippets.json checks more
// against Jinja2 itself).
#include "rl/model/chat/jinja_lexer.h"

#include <gtest/gtest.h>

namespace rl::chat::jinja {
namespace {

// The data tokens joined with '|', and the other tokens as their kind.
std::string Shape(const std::string& source) {
  auto tokens = Lex(source);
  if (!tokens.ok()) return "error: " + tokens.status().message();
  std::string out;
  for (const Token& t : *tokens) {
    switch (t.type) {
      case TokenType::kData: out += "[" + t.value + "]"; break;
      case TokenType::kVarBegin: out += "{{"; break;
      case TokenType::kVarEnd: out += "}}"; break;
      case TokenType::kBlockBegin: out += "{%"; break;
      case TokenType::kBlockEnd: out += "%}"; break;
      case TokenType::kEof: break;
      default: out += " " + t.value; break;
    }
  }
  return out;
}

TEST(LexerTest, WhitespaceRulesMatchJinjaWithTrimAndLstripBlocks) {
  const std::pair<const char*, const char*> cases[] = {
      {"a\n{% if x %}\nb", "[a\n]{% if x%}[b]"},                    // trim_blocks eats one newline
      {"a\n  {% if x %}  b", "[a\n]{% if x%}[  b]"},                // lstrip_blocks: indentation
      {"  {% if x %}", "{% if x%}"},                                // at the start of the source
      {"a  {% if x %}", "[a  ]{% if x%}"},                          // not at a line start: kept
      {"a\n  {{ x }}", "[a\n  ]{{ x}}"},                            // never for {{ }}
      {"a\n  {%+ if x %}", "[a\n  ]{% if x%}"},                     // + keeps the indentation
      {"{% if x +%}\nb", "{% if x%}[\nb]"},                         // +%} keeps the newline
      {"a \n {%- if x -%} \n b", "[a]{% if x%}[b]"},                // - strips all whitespace
      {"a {{- x -}} b", "[a]{{ x}}[b]"},
      {"a\n  {# c #}\nb", "[a\n][b]"},                              // comments: both rules
      {"a {#- c -#} b", "[a][b]"},
      {"x\r\ny\r\n", "[x\ny]"},                                     // newlines normalized, last dropped
      {"{% raw %} {{ x }} {% endraw %}", "[ {{ x }} ]"},
      {"{{ {'a': {'b': 1}} }}", "{{ { a : { b : 1 } }}}"},          // }} inside braces is not an end
  };
  for (const auto& [src, want] : cases) EXPECT_EQ(Shape(src), want) << src;
}

TEST(LexerTest, LiteralsDecodePythonEscapesAndUnderscores) {
  auto tokens = Lex("{{ 'a\\n\\x41\\u00e9\\q' 1_000 1.5e3 0x1F }}");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ((*tokens)[1].value, "a\nA\xc3\xa9\\q");
  EXPECT_EQ((*tokens)[2].type, TokenType::kInteger);
  EXPECT_EQ((*tokens)[2].value, "1000");
  EXPECT_EQ((*tokens)[3].type, TokenType::kFloat);
  EXPECT_EQ((*tokens)[4].value, "0x1F");
}

TEST(LexerTest, MalformedSourcesAreOneLineErrorsWithTheLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"ok\n{# never closed", "line 2: missing end of comment tag"},
      {"\n\n{{ x", "line 3: unexpected end of template: '{{' is never closed"},
      {"{% if x", "line 1: unexpected end of template: '{%' is never closed"},
      {"{{ 'abc }}", "line 1: unterminated string literal"},
      {"{{ (1 }}", "line 1: unexpected '}', expected ')'"},
      {"{{ 1 ) }}", "line 1: unexpected ')'"},
      {"\n{{ 1 $ 2 }}", "line 2: unexpected char '$'"},
      {"{% raw %}never ends", "line 1: missing end of raw directive"},
      {"{{ '\\x4' }}", "line 1: truncated \\x escape"},
  };
  for (const auto& [src, want] : cases) {
    auto tokens = Lex(src);
    ASSERT_FALSE(tokens.ok()) << src;
    EXPECT_EQ(tokens.status().code(), Code::kDataError);
    EXPECT_EQ(tokens.status().message(), want) << src;
  }
}

}  // namespace
}  // namespace rl::chat::jinja
