#include "rl/reward/verifier.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "rl/task/math_answer.h"

namespace rl::reward {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<Result<double>> Verifier::ScoreBatch(const std::vector<RewardRequest>& reqs) {
  std::vector<Result<double>> out;
  out.reserve(reqs.size());
  for (const RewardRequest& req : reqs) out.push_back(Score(req));
  return out;
}

namespace {

class AdditionVerifier final : public Verifier {
 public:
  Result<double> Score(const RewardRequest& req) override { return req.response == req.answer ? 1.0 : 0.0; }
};

class ExactVerifier final : public Verifier {
 public:
  Result<double> Score(const RewardRequest& req) override {
    return FinalAnswer(req.response) == Trim(req.answer) ? 1.0 : 0.0;
  }
};

class NumericVerifier final : public Verifier {
 public:
  explicit NumericVerifier(double tolerance) : tolerance_(tolerance) {}
  Result<double> Score(const RewardRequest& req) override {
    std::string_view answer = Trim(req.answer);
    std::optional<double> want = LastNumber(answer);
    if (!want || answer.empty() || (!IsDigit(answer.front()) && answer.front() != '-' && answer.front() != '.') ||
        !IsDigit(answer.back()) || answer.find_first_of(" \t\n") != std::string_view::npos) {
      return Status::DataError("numeric verifier: the answer '" + req.answer + "' is not a number");
    }
    std::optional<double> got = LastNumber(FinalAnswer(req.response));
    if (!got) return 0.0;
    return std::fabs(*got - *want) <= tolerance_ ? 1.0 : 0.0;
  }

 private:
  double tolerance_;
};

class MathVerifier final : public Verifier {
 public:
  Result<double> Score(const RewardRequest& req) override { return task::MathReward(req.response, req.answer); }
};

}  // namespace

std::string FinalAnswer(std::string_view response) {
  size_t mark = response.rfind("####");
  if (mark != std::string_view::npos) return std::string(Trim(response.substr(mark + 4)));
  std::string_view rest = Trim(response);
  size_t nl = rest.rfind('\n');
  return std::string(nl == std::string_view::npos ? rest : Trim(rest.substr(nl + 1)));
}

std::optional<double> LastNumber(std::string_view text) {
  // Find the last run of digits, then widen it to a whole number: sign, thousands separators,
  // a fraction and an exponent.
  size_t end = text.size();
  while (end > 0 && !IsDigit(text[end - 1])) --end;
  if (end == 0) return std::nullopt;
  size_t begin = end;
  auto part_of_number = [&](size_t i) {
    char c = text[i - 1];
    if (IsDigit(c) || c == '.') return true;
    if (c == ',' && i >= 2 && IsDigit(text[i - 2]) && i < text.size() && IsDigit(text[i])) return true;
    if ((c == 'e' || c == 'E') && i >= 2 && IsDigit(text[i - 2])) return true;
    if ((c == '-' || c == '+') && i >= 2 && (text[i - 2] == 'e' || text[i - 2] == 'E')) return true;
    return false;
  };
  while (begin > 0 && part_of_number(begin)) --begin;
  if (begin > 0 && text[begin - 1] == '-') --begin;
  std::string digits;
  for (char c : text.substr(begin, end - begin)) {
    if (c != ',') digits.push_back(c);
  }
  // A stray leading '.' or trailing exponent letter is not part of the number.
  while (!digits.empty() && digits.back() == '.') digits.pop_back();
  char* parse_end = nullptr;
  double v = std::strtod(digits.c_str(), &parse_end);
  if (parse_end == digits.c_str() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::unique_ptr<Verifier> MakeAdditionVerifier() { return std::make_unique<AdditionVerifier>(); }
std::unique_ptr<Verifier> MakeExactVerifier() { return std::make_unique<ExactVerifier>(); }
std::unique_ptr<Verifier> MakeNumericVerifier(double tolerance) {
  return std::make_unique<NumericVerifier>(tolerance);
}
std::unique_ptr<Verifier> MakeMathVerifier() { return std::make_unique<MathVerifier>(); }

Result<std::unique_ptr<Verifier>> MakeVerifier(const std::string& name, double tolerance) {
  if (name == "addition") return MakeAdditionVerifier();
  if (name == "exact") return MakeExactVerifier();
  if (name == "math") return MakeMathVerifier();
  if (name == "numeric") {
    if (!(tolerance >= 0) || !std::isfinite(tolerance)) {
      return Status::InvalidArgument("--tolerance must be a finite number >= 0");
    }
    return MakeNumericVerifier(tolerance);
  }
  return Status::InvalidArgument("unknown verifier '" + name + "' (addition, exact, numeric or math)");
}

}  // namespace rl::reward
