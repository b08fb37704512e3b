// The RenderChat API: what the template sees, the config lookup, one-line errors, and that no
// damaged template crashes. Byte-for-byte agreement with Jinja2 is chat_reference_test.cc's.
#include "rl/model/chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace rl::chat {
namespace {

using Json = nlohmann::ordered_json;

// A ChatML template of the Qwen family, small enough to check by hand.
constexpr const char* kChatMl =
    "{%- for m in messages %}\n"
    "    {{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n";

Json Conversation() {
  return Json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"}])");
}

TEST(ChatTemplateTest, RendersAChatMlConversation) {
  ChatOptions o;
  auto text = RenderChat(kChatMl, Conversation(), o);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+3?<|im_end|>\n");
  o.add_generation_prompt = true;
  o.variables["enable_thinking"] = false;
  EXPECT_EQ(*RenderChat(kChatMl, Conversation(), o),
            *text + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateTest, TemplateSeesToolsDocumentsTokensAndTheClock) {
  ChatOptions o;
  const char* tpl = "{{ tools is none }} {{ documents is none }} {{ bos_token }} {{ strftime_now('%Y-%m-%d') }}";
  o.variables["bos_token"] = "<s>";
  o.now = 86400 * 365;  // 1971-01-01 in UTC; local time zones shift it by less than a day
  auto text = RenderChat(tpl, Json::array(), o);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("True True <s> 197"), std::string::npos) << *text;
  o.tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "description": "d"}}])");
  EXPECT_EQ(*RenderChat("{{ tools[0]|tojson }}", Json::array(), o),
            "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\"}}");
}

TEST(ChatTemplateTest, FindsTheTemplateInATokenizerConfig) {
  EXPECT_EQ(*ChatTemplateFromConfig(Json::parse(R"({"chat_template": "{{ x }}"})")), "{{ x }}");
  Json named = Json::parse(
      R"({"chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})");
  EXPECT_EQ(*ChatTemplateFromConfig(named), "A");
  EXPECT_EQ(*ChatTemplateFromConfig(named, "tool_use"), "B");
  EXPECT_EQ(ChatTemplateFromConfig(named, "rag").status().code(), Code::kNotFound);
  EXPECT_EQ(ChatTemplateFromConfig(Json::object()).status().code(), Code::kNotFound);
  EXPECT_EQ(ChatTemplateFromConfig(Json::parse(R"({"chat_template": 3})")).status().code(), Code::kDataError);
}

TEST(ChatTemplateTest, ErrorsAreOneLineAndNameTheTemplateLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"line one\n{% if x %}\nnever closed", "chat template line 3: unexpected end of template: 'if' from line 2 "
                                             "is never closed (expected 'endif')"},
      {"{% endfor %}", "chat template line 1: encountered unknown tag 'endfor'"},
      {"\n\n{{ x|nosuch }}", "chat template line 3: no filter named 'nosuch'"},
      {"{{ x is nosuch }}", "chat template line 1: no test named 'nosuch'"},
      {"{% break %}", "chat template line 1: 'break' outside of a loop"},
      {"{{ 1 + }}", "chat template line 1: unexpected 'end of print statement'"},
      {"a\n{{ raise_exception('Roles must\nalternate') }}", "chat template line 2: raise_exception: Roles must\\nalternate"},
      {"{% for m in messages %}\n{{ m.content + 1 }}{% endfor %}",
       "chat template line 2: can only concatenate str (not \"int\") to str"},
  };
  for (const auto& [src, want] : cases) {
    auto text = RenderChat(src, Conversation(), ChatOptions{});
    ASSERT_FALSE(text.ok()) << src;
    EXPECT_EQ(text.status().code(), Code::kDataError) << src;
    EXPECT_EQ(text.status().message(), want) << src;
  }
}

TEST(ChatTemplateTest, OutputLargerThanTheLimitIsAnError) {
  ChatOptions o;
  o.max_output_bytes = 100;
  auto text = RenderChat("{% for i in range(10) %}{{ 'x' * 20 }}{% endfor %}", Json::array(), o);
  EXPECT_EQ(text.status().code(), Code::kTooLarge);
  EXPECT_EQ(text.status().message(), "chat template line 1: output larger than 100 bytes");
}

// Every prefix and every one-byte deletion of the feature templates: a result or a one-line
// error, never a crash (run under ASan/UBSan in the fuzz build too).
TEST(ChatTemplateTest, DamagedTemplatesNeverCrash) {
  namespace fs = std::filesystem;
  Json convs;
  {
    std::ifstream in(fs::path(RL_SOURCE_DIR) / "tests" / "chat" / "conversations.json");
    convs = Json::parse(in);
  }
  ChatOptions o;
  o.tools = convs[7]["tools"];
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(RL_SOURCE_DIR) / "tests" / "chat" / "templates")) {
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string src = ss.str();
    for (size_t n = 0; n < src.size(); n += 3) {
      for (const std::string& variant : {src.substr(0, n), src.substr(0, n) + src.substr(n + 1)}) {
        auto text = RenderChat(variant, convs[7]["messages"], o);
        if (!text.ok()) {
          EXPECT_EQ(text.status().message().find('\n'), std::string::npos) << variant;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 2000);
}

}  // namespace
}  // namespace rl::chat
