#include "rl/reward/judge_prompt.h"

namespace rl::reward {

Result<JudgePrompt> JudgePrompt::Parse(const std::string& text) {
  JudgePrompt p;
  std::string literal;
  auto flush = [&] {
    if (!literal.empty()) p.pieces_.push_back({Part::kText, literal});
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      literal += c;
      ++i;
      continue;
    }
    if (c == '}') return Status::InvalidArgument("judge template: lone '}' at byte " + std::to_string(i));
    if (c != '{') {
      literal += c;
      continue;
    }
    size_t end = text.find('}', i);
    if (end == std::string::npos) {
      return Status::InvalidArgument("judge template: unclosed '{' at byte " + std::to_string(i));
    }
    std::string name = text.substr(i + 1, end - i - 1);
    Part part;
    if (name == "prompt") part = Part::kPrompt;
    else if (name == "response") part = Part::kResponse;
    else if (name == "answer") part = Part::kAnswer;
    else
      return Status::InvalidArgument("judge template: unknown placeholder {" + name + "} at byte " +
                                     std::to_string(i) + " (known: {prompt}, {response}, {answer})");
    flush();
    p.pieces_.push_back({part, ""});
    i = end;
  }
  flush();
  return p;
}

std::string JudgePrompt::Render(const RewardRequest& req) const {
  std::string out;
  for (const Piece& piece : pieces_) {
    switch (piece.part) {
      case Part::kText: out += piece.text; break;
      case Part::kPrompt: out += req.prompt; break;
      case Part::kResponse: out += req.response; break;
      case Part::kAnswer: out += req.answer; break;
    }
  }
  return out;
}

bool JudgePrompt::uses_answer() const {
  for (const Piece& piece : pieces_) {
    if (piece.part == Part::kAnswer) return true;
  }
  return false;
}

}  // namespace rl::reward
