#include "rl/model/chat/jinja_eval.h"

#include <gtest/gtest.h>

#include "rl/model/chat/jinja_parser.h"

namespace rl::chat::jinja {
namespace {

Result<std::string> RenderText(const std::string& src, const Json& vars = Json::object()) {
  RL_ASSIGN_OR_RETURN(auto tpl, Parse(src));
  Variables v;
  for (const auto& [k, e] : vars.items()) v.emplace_back(k, Value(e));
  return Render(*tpl, v, RenderLimits{});
}

TEST(JinjaEvalTest, Smoke) {
  auto r = RenderText("{% for m in messages %}{{ loop.index }}:{{ m.role }} {% endfor %}",
                      Json::parse(R"({"messages":[{"role":"a"},{"role":"b"}]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "1:a 2:b ");
}

}  // namespace
}  // namespace rl::chat::jinja
