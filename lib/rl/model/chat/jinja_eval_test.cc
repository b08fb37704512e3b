// The evaluator, table-driven: each expected text is what Jinja2 3.1 renders for the template
// (the same environment as transformers); tests/chat/snippets.json and the reference test check
// many more cases against Jinja2 itself when python3-jinja2 is installed.
#include "rl/model/chat/jinja_eval.h"

#include <gtest/gtest.h>

#include "rl/model/chat/jinja_parser.h"

namespace rl::chat::jinja {
namespace {

Result<std::string> RenderText(const std::string& src, const Json& vars = Json::object(),
                               const RenderLimits& limits = RenderLimits{}) {
  RL_ASSIGN_OR_RETURN(auto tpl, Parse(src));
  Variables v;
  for (const auto& [k, e] : vars.items()) v.emplace_back(k, Value(e));
  return Render(*tpl, v, limits);
}

struct Row {
  const char* src;
  const char* vars;
  const char* want;
};

void ExpectRows(const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    auto out = RenderText(r.src, Json::parse(r.vars));
    ASSERT_TRUE(out.ok()) << r.src << ": " << out.status().ToString();
    EXPECT_EQ(*out, r.want) << r.src;
  }
}

TEST(JinjaEvalTest, LoopsExposeTheLoopVariable) {
  ExpectRows({
      {"{% for m in ms %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}",
       R"({"ms": [1, 2]})", "102TrueFalse2 211FalseTrue2 "},
      {"{% for m in ms if m > 1 %}{{ loop.index }}/{{ loop.length }}:{{ m }} {% endfor %}", R"({"ms": [1, 2, 3]})",
       "1/2:2 2/2:3 "},
      {"{% for m in ms %}x{% else %}empty{% endfor %}", R"({"ms": []})", "empty"},
      {"{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})", "b=1;a=2;"},
      {"{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"b": 1, "a": 2}})", "ba"},
      {"{% for i in [1, 2, 3, 4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}",
       "{}", "13"},
      {"{% for m in ms[::-1] %}{{ m }}{% endfor %}", R"({"ms": [1, 2, 3]})", "321"},
  });
}

TEST(JinjaEvalTest, SetInsideALoopStaysInTheIterationButNamespacesCarryOut) {
  ExpectRows({
      {"{% set x = 1 %}{% for i in [1] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", "{}", "121"},
      {"{% for i in [1, 2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}", "{}", "[]"},
      {"{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "{}", "2"},
      {"{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "{}", "6"},
  });
}

TEST(JinjaEvalTest, ExpressionsFollowPythonSemantics) {
  ExpectRows({
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", "{}",
       "3 -4 2 3.5 1024 3.0 0.5"},
      {"{{ 1 == 1.0 }} {{ true == 1 }} {{ true + 1 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", "{}", "True True 2 True False"},
      {"{{ 1 and 2 }} {{ 0 or 'x' }} {{ 'yes' if x else 'no' }} [{{ 'only' if false }}]", "{}", "2 x no []"},
      {"{{ 'a' ~ none ~ 1.5 ~ true ~ missing }}", "{}", "aNone1.5True"},
      {"{{ 2 * 3 ~ 4 }} {{ -1|abs }} {{ 'ab' * 2 }}", "{}", "64 1 abab"},
      {"{{ x }} {{ [1, 'a', none, true, 1.5, {'k': 'v'}] }}", R"({"x": 1e16})",
       "1e+16 [1, 'a', None, True, 1.5, {'k': 'v'}]"},
      {"{{ m.content.split('</think>')[-1].lstrip('\\n') }}", R"({"m": {"content": "<think>x</think>\n\nhi"}})", "hi"},
      {"{{ '</think>' in s }} {{ 'x' not in s }} {{ 'role' in m }}", R"({"s": "a</think>", "m": {"role": 1}})",
       "True True True"},
      {"{{ s[1:3] }}{{ s[-1] }}{{ s|length }}", R"({"s": "h\u00e9llo"})", "\u00e9lo5"},
  });
}

TEST(JinjaEvalTest, UndefinedPrintsEmptyAndIsFalsyButFailsWhenUsed) {
  ExpectRows({
      {"[{{ missing }}]{{ missing is defined }}{{ m.nope is defined }}{{ missing|length }}", R"({"m": {}})",
       "[]FalseFalse0"},
      {"{{ missing|default('d') }} {{ ''|default('e', true) }}", "{}", "d e"},
      {"{% for x in missing %}x{% endfor %}ok", "{}", "ok"},
  });
  const std::pair<const char*, const char*> errors[] = {
      {"{{ m.a.b }}", "line 1: 'dict object' has no attribute 'a'"},
      {"\n{{ 'x' + missing }}", "line 2: 'missing' is undefined"},
      {"{{ missing() }}", "line 1: 'missing' is undefined"},
      {"{{ none.x.y }}", "line 1: 'None' has no attribute 'x'"},
  };
  for (const auto& [src, want] : errors) {
    auto out = RenderText(src, Json::parse(R"({"m": {}})"));
    ASSERT_FALSE(out.ok()) << src;
    EXPECT_EQ(out.status().message(), want) << src;
  }
}

TEST(JinjaEvalTest, FiltersAndTojsonAsTransformersDefinesIt) {
  ExpectRows({
      {"{{ t|tojson }}", R"({"t": {"z": 1, "a": ["\u00e9", 2.5, null]}})", "{\"z\": 1, \"a\": [\"\u00e9\", 2.5, null]}"},
      {"{{ t|tojson(indent=2) }}", R"({"t": {"a": [1], "b": {}}})", "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}"},
      {"{{ t|tojson(sort_keys=true, separators=(',', ':')) }}", R"({"t": {"b": 1, "a": 2}})", "{\"a\":2,\"b\":1}"},
      {"{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join(',') }}",
       R"({"ms": [{"role": "user", "c": 1}, {"role": "x", "c": 2}, {"role": "user", "c": 3}]})", "1,3"},
      {"{{ ' x '|trim }}|{{ 'ab'|upper }}|{{ [3, 1]|first }}|{{ 'abc'|last }}|{{ '4.7'|int }}|{{ 'a-b'|replace('-', '+') }}",
       "{}", "x|AB|3|c|4|a+b"},
  });
}

TEST(JinjaEvalTest, MacrosCallBlocksAndFilterBlocks) {
  ExpectRows({
      {"{% macro m(a, b='!') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, b='?') }}", "{}", "1!2?"},
      {"{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
       "{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}",
       "{}", "<1><2>"},
      {"{% set s | upper %}ab{% endset %}{{ s }}{% filter lower %}CD{% endfilter %}", "{}", "ABcd"},
  });
}

TEST(JinjaEvalTest, SandboxBoundsOutputLoopsAndRecursion) {
  RenderLimits small;
  small.max_output_bytes = 1000;
  small.max_loop_iterations = 5000;
  auto big = RenderText("{% for i in range(100) %}{{ 'x' * 100 }}{% endfor %}", Json::object(), small);
  EXPECT_EQ(big.status().code(), Code::kTooLarge);
  auto loops = RenderText("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", Json::object(), small);
  EXPECT_EQ(loops.status().code(), Code::kTooLarge);
  auto recursion = RenderText("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_EQ(recursion.status().code(), Code::kTooLarge);
  auto range = RenderText("{{ range(200000)|length }}");
  EXPECT_EQ(range.status().code(), Code::kTooLarge);
  auto repeat = RenderText("{{ 'x' * 100000000 }}");
  EXPECT_FALSE(repeat.ok());
  std::string deep;
  for (int i = 0; i < 500; ++i) deep += "{% if true %}";
  EXPECT_NE(RenderText(deep).status().message().find("nested too deeply"), std::string::npos);
  EXPECT_NE(RenderText("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").status().message().find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(RenderText("{{ " + std::string(5000, '-') + "1 }}").status().message().find("nested too deeply"),
            std::string::npos);
}

}  // namespace
}  // namespace rl::chat::jinja
