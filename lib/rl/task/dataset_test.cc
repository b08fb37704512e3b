#include "rl/task/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

namespace rl::task {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/rl-dataset-" + std::to_string(::getpid()) + "-" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

DatasetOptions Messages() {
  DatasetOptions o;
  o.messages_key = "messages";
  return o;
}

struct ParseCase {
  const char* line;
  DatasetOptions options;
  const char* error;  // nullptr: parses; else the exact DataError message
  const char* prompt, *answer, *response;
  size_t messages;
};

DatasetOptions With(void (*edit)(DatasetOptions*)) {
  DatasetOptions o;
  edit(&o);
  return o;
}

const ParseCase kParseCases[] = {
    {R"({"prompt": "1+1?", "answer": "2"})", {}, nullptr, "1+1?", "2", "", 0},
    {R"({"prompt": "p", "answer": 2})", {}, nullptr, "p", "2", "", 0},
    {R"({"prompt": "p", "answer": 2.0})", {}, nullptr, "p", "2", "", 0},
    {R"({"prompt": "p", "answer": -0.1})", {}, nullptr, "p", "-0.1", "", 0},
    {R"({"prompt": "p", "answer": 2.5e-7})", {}, nullptr, "p", "2.5e-07", "", 0},
    {R"({"prompt": "p", "answer": 18446744073709551615})", {}, nullptr, "p", "18446744073709551615", "", 0},
    {R"({"problem": "p", "solution": "\\boxed{1}"})", With([](DatasetOptions* o) {
       o->prompt_key = "problem";
       o->answer_key = "solution";
     }), nullptr, "p", "\\boxed{1}", "", 0},
    {R"({"extra": {"question": "q"}, "answer": "1"})", With([](DatasetOptions* o) { o->prompt_key = "extra.question"; }),
     nullptr, "q", "1", "", 0},
    {R"({"extra.question": "flat", "answer": "1"})", With([](DatasetOptions* o) { o->prompt_key = "extra.question"; }),
     nullptr, "flat", "1", "", 0},
    {R"({"prompt": "p", "answer": "1", "response": "r"})", With([](DatasetOptions* o) { o->response_key = "response"; }),
     nullptr, "p", "1", "r", 0},
    {R"({"prompt": "p"})", With([](DatasetOptions* o) { o->answer_key = ""; }), nullptr, "p", "", "", 0},
    {R"({"prompt": "p", "answer": "1"})", With([](DatasetOptions* o) { o->system_prompt = "be brief"; }), nullptr,
     "p", "1", "", 2},
    {R"({"messages": [{"role": "user", "content": "hi"}], "answer": "1"})", Messages(), nullptr, "", "1", "", 1},
    {R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "answer": "1"})",
     Messages(), nullptr, "", "1", "yo", 1},
    // Errors: not JSON, not an object, a missing key, a wrong type.
    {"{\"prompt\": ", {}, "not JSON (error at byte 12)", "", "", "", 0},
    {"not json", {}, "not JSON (error at byte 2)", "", "", "", 0},
    {"{\"prompt\": \"\xff\", \"answer\": \"1\"}", {}, "not JSON (error at byte 13)", "", "", "", 0},
    {R"(["prompt", "answer"])", {}, "not a JSON object (it is array)", "", "", "", 0},
    {R"({"answer": "1"})", {}, "no \"prompt\"", "", "", "", 0},
    {R"({"prompt": "p"})", {}, "no \"answer\"", "", "", "", 0},
    {R"({"prompt": 5, "answer": "1"})", {}, "\"prompt\" is not a string (it is number)", "", "", "", 0},
    {R"({"prompt": "p", "answer": null})", {}, "\"answer\" is not a string or a number (it is null)", "", "", "", 0},
    {R"({"prompt": "p", "answer": [1]})", {}, "\"answer\" is not a string or a number (it is array)", "", "", "", 0},
    {R"({"extra": 5, "answer": "1"})", With([](DatasetOptions* o) { o->prompt_key = "extra.question"; }),
     "no \"extra.question\"", "", "", "", 0},
    {R"({"prompt": "p", "answer": "1"})", With([](DatasetOptions* o) {
       o->response_key = "response";
       o->require_response = true;
     }), "no \"response\"", "", "", "", 0},
    {R"({"messages": "hi", "answer": "1"})", Messages(), "\"messages\" is not a list (it is string)", "", "", "", 0},
    {R"({"messages": [], "answer": "1"})", Messages(), "\"messages\" is empty", "", "", "", 0},
    {R"({"messages": [5], "answer": "1"})", Messages(), "\"messages\"[0] is not an object (it is number)", "", "", "",
     0},
    {R"({"messages": [{"role": "user"}], "answer": "1"})", Messages(), "\"messages\"[0]: no \"content\"", "", "", "",
     0},
    {R"({"messages": [{"role": "assistant", "content": "a"}], "answer": "1"})", Messages(),
     "\"messages\" has no message before the response", "", "", "", 0},
    {R"({"messages": [{"role": "user", "content": "q"}], "answer": "1"})", With([](DatasetOptions* o) {
       o->messages_key = "messages";
       o->require_response = true;
     }), "\"messages\" does not end with an assistant message", "", "", "", 0},
};

TEST(DatasetTest, ParsesEveryLineOfTheTable) {
  for (const ParseCase& c : kParseCases) {
    Result<Example> e = ParseExample(c.line, c.options);
    if (c.error) {
      ASSERT_FALSE(e.ok()) << c.line;
      EXPECT_EQ(e.status().code(), Code::kDataError) << c.line;
      EXPECT_EQ(e.status().message(), c.error) << c.line;
      continue;
    }
    ASSERT_TRUE(e.ok()) << c.line << ": " << e.status().ToString();
    EXPECT_EQ(e->prompt, c.prompt) << c.line;
    EXPECT_EQ(e->answer, c.answer) << c.line;
    EXPECT_EQ(e->response, c.response) << c.line;
    EXPECT_EQ(e->messages.size(), c.messages) << c.line;
  }
}

TEST(DatasetTest, TheSystemPromptComesFirstUnlessTheRecordHasOne) {
  DatasetOptions o = Messages();
  o.system_prompt = "S";
  auto e = ParseExample(R"({"messages": [{"role": "user", "content": "q"}], "answer": "1"})", o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->messages, (std::vector<Message>{{"system", "S"}, {"user", "q"}}));
  e = ParseExample(R"({"messages": [{"role": "system", "content": "own"}, {"role": "user", "content": "q"}], "answer": 1})", o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->messages, (std::vector<Message>{{"system", "own"}, {"user", "q"}}));
  o = DatasetOptions();
  o.system_prompt = "S";
  e = ParseExample(R"({"prompt": "q", "answer": "1"})", o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->messages, (std::vector<Message>{{"system", "S"}, {"user", "q"}}));
  EXPECT_EQ(e->prompt, "q");
}

TEST(DatasetTest, OpenNamesTheFileAndLineOfAMalformedLine) {
  std::string path = WriteFile("bad", "{\"prompt\":\"a\",\"answer\":\"1\"}\n\n{\"prompt\":\"b\"}\n");
  auto d = Dataset::Open(path, {});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kDataError);
  EXPECT_EQ(d.status().message(), path + ":3: no \"answer\"");
  EXPECT_EQ(ExitCodeFor(d.status()), kExitDataErr);
}

TEST(DatasetTest, SkipMalformedCountsTheSkippedLines) {
  std::string path = WriteFile("skip", "garbage\n{\"prompt\":\"a\",\"answer\":\"1\"}\n[]\n{\"prompt\":\"b\",\"answer\":2}");
  DatasetOptions o;
  o.skip_malformed = true;
  auto d = Dataset::Open(path, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->size(), 2u);
  EXPECT_EQ((*d)->skipped(), 2u);
  auto e = (*d)->Read(1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->prompt, "b");
  EXPECT_EQ(e->answer, "2");
  EXPECT_EQ(e->line, 4u);
}

TEST(DatasetTest, AFileWithNoExampleIsADataError) {
  auto d = Dataset::Open(WriteFile("empty", "\n  \n"), {});
  EXPECT_EQ(d.status().code(), Code::kDataError);
  EXPECT_EQ(Dataset::Open("/nonexistent/x.jsonl", {}).status().code(), Code::kIOError);
}

TEST(DatasetTest, ALineOverTheLimitIsAnErrorNotAnAllocation) {
  std::string big = "{\"prompt\":\"" + std::string(200, 'x') + "\",\"answer\":\"1\"}";
  std::string path = WriteFile("long", "{\"prompt\":\"a\",\"answer\":\"1\"}\r\n" + big + "\n{\"prompt\":\"c\",\"answer\":\"3\"}\n");
  DatasetOptions o;
  o.max_line_bytes = 100;
  auto d = Dataset::Open(path, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), path + ":2: line longer than 100 bytes");
  o.skip_malformed = true;
  d = Dataset::Open(path, o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->size(), 2u);
  EXPECT_EQ((*d)->Read(1)->prompt, "c");
}

TEST(LineReaderTest, SplitsLinesAcrossBuffersAndDropsCrAndBom) {
  std::string text = "\xEF\xBB\xBF" "a\r\n" + std::string(100000, 'b') + "\n\nlast";
  std::istringstream in(text);
  LineReader r(&in, kMaxLineBytes, 1, 0, 7);  // lines cut across many small reads
  std::string line;
  std::vector<std::string> got;
  std::vector<uint64_t> offsets;
  while (*r.Next(&line) == LineReader::Got::kLine) {
    got.push_back(line);
    offsets.push_back(r.line_offset());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"a", std::string(100000, 'b'), "", "last"}));
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 6, 100007, 100008}));
  EXPECT_EQ(r.line_number(), 4u);
}

TEST(DatasetCursorTest, ShuffledOrderMatchesAnIndependentImplementation) {
  // From a Python transcription of the documented rule (splitmix64, Fisher-Yates).
  EXPECT_EQ(ShuffledOrder(10, 42, 0), (std::vector<size_t>{0, 9, 5, 8, 6, 4, 7, 2, 1, 3}));
  EXPECT_EQ(ShuffledOrder(10, 42, 1), (std::vector<size_t>{2, 3, 9, 7, 5, 8, 6, 4, 0, 1}));
  EXPECT_EQ(ShuffledOrder(7, 0, 3), (std::vector<size_t>{6, 3, 2, 5, 0, 1, 4}));
}

TEST(DatasetCursorTest, EachEpochCoversEveryExampleOnceAndAnyPositionReadsTheSame) {
  std::string text;
  for (int i = 0; i < 7; ++i) text += "{\"prompt\":\"p" + std::to_string(i) + "\",\"answer\":" + std::to_string(i) + "}\n";
  auto d = Dataset::Open(WriteFile("cursor", text), {});
  ASSERT_TRUE(d.ok());
  DatasetCursor plain(d->get(), std::nullopt), shuffled(d->get(), 5), again(d->get(), 5);
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<std::string> seen;
    for (uint64_t i = 0; i < 7; ++i) {
      auto e = shuffled.At(epoch * 7 + i);
      ASSERT_TRUE(e.ok());
      EXPECT_EQ(e->prompt, "p" + e->answer);
      seen.insert(e->prompt);
      EXPECT_EQ(plain.At(epoch * 7 + i)->prompt, "p" + std::to_string(i));
    }
    EXPECT_EQ(seen.size(), 7u);
  }
  EXPECT_NE(ShuffledOrder(7, 5, 0), ShuffledOrder(7, 5, 1));
  // Starting at position 17 (a restart) reads what a cursor that went through 0..16 read there.
  EXPECT_EQ(again.At(17)->prompt, shuffled.At(17)->prompt);
  EXPECT_EQ(again.IndexAt(17), ShuffledOrder(7, 5, 2)[3]);
}

TEST(DatasetTest, JsonRoundTripKeepsTheExample) {
  Example e;
  e.messages = {{"user", "q"}};
  e.answer = "1";
  e.response = "r";
  std::ostringstream out;
  ASSERT_TRUE(WriteJsonLine(out, ExampleToJson(e)).ok());
  EXPECT_EQ(out.str(), R"({"messages":[{"role":"user","content":"q"}],"answer":"1","response":"r"})" "\n");
  DatasetOptions o = Messages();
  o.response_key = "response";
  std::string line = out.str();
  line.pop_back();
  auto back = ParseExample(line, o);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->messages, e.messages);
  EXPECT_EQ(back->response, "r");
  std::ostringstream bad;
  ASSERT_TRUE(WriteJsonLine(bad, {{"prompt", "\xff"}}).ok());  // invalid UTF-8: replaced, no throw
}

TEST(DatasetTest, SurvivesRandomBytes) {
  std::mt19937_64 gen(3);
  const std::string alphabet = "{}[]\":,. \n\\0123456789eE-+truefalsnlpromptanswermessagesrolecontent";
  std::string file;
  for (int i = 0; i < 20000; ++i) {
    std::string s(gen() % 80, ' ');
    for (char& c : s) c = gen() % 4 ? alphabet[gen() % alphabet.size()] : static_cast<char>(gen());
    auto e = ParseExample(s, gen() % 2 ? DatasetOptions() : Messages());
    if (!e.ok()) {
      EXPECT_EQ(e.status().code(), Code::kDataError);
    }
    file += s;
  }
  DatasetOptions o;
  o.skip_malformed = true;
  o.max_line_bytes = 64;
  auto d = Dataset::Open(WriteFile("fuzz", file + "\n{\"prompt\":\"p\",\"answer\":1}\n"), o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  for (size_t i = 0; i < (*d)->size(); ++i) EXPECT_TRUE((*d)->Read(i).ok());
}

}  // namespace
}  // namespace rl::task
