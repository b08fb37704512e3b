#include "rl/task/rational.h"

namespace rl::task {
namespace {

using U128 = unsigned __int128;
constexpr U128 kMax = ~static_cast<U128>(0);
constexpr size_t kMaxDigits = 36;  // 10^36 < 2^128 / 10: no overflow while reading

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

U128 Gcd(U128 a, U128 b) {
  while (b != 0) {
    U128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

std::optional<U128> Mul(U128 a, U128 b) {
  if (a != 0 && b > kMax / a) return std::nullopt;
  return a * b;
}

Rational Reduced(bool negative, U128 num, U128 den) {
  U128 g = Gcd(num, den);
  if (g > 1) {
    num /= g;
    den /= g;
  }
  return {negative && num != 0, num, den};
}

std::string ToDecimal(U128 v) {
  if (v == 0) return "0";
  std::string s;
  for (; v != 0; v /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
  return s;
}

// Strips one leading sign; returns whether it was '-'.
bool TakeSign(std::string_view* s) {
  if (s->empty() || (s->front() != '-' && s->front() != '+')) return false;
  bool negative = s->front() == '-';
  s->remove_prefix(1);
  return negative;
}

std::optional<Rational> Divide(const Rational& a, const Rational& b) {
  if (b.num == 0) return std::nullopt;
  auto num = Mul(a.num, b.den), den = Mul(a.den, b.num);
  if (!num || !den) return std::nullopt;
  return Reduced(a.negative != b.negative, *num, *den);
}

// "\frac{A}{B}" -> A and B (no nesting: the arguments are plain numbers).
bool SplitFrac(std::string_view s, std::string_view* a, std::string_view* b) {
  constexpr std::string_view kFrac = "\\frac{";
  if (s.substr(0, kFrac.size()) != kFrac || s.back() != '}') return false;
  s.remove_prefix(kFrac.size());
  s.remove_suffix(1);
  size_t mid = s.find("}{");
  if (mid == std::string_view::npos) return false;
  *a = s.substr(0, mid);
  *b = s.substr(mid + 2);
  return a->find_first_of("{}") == std::string_view::npos && b->find_first_of("{}") == std::string_view::npos;
}

}  // namespace

std::optional<Rational> ParseDecimal(std::string_view s) {
  bool negative = TakeSign(&s);
  U128 num = 0, den = 1;
  size_t digits = 0;
  bool point = false;
  for (char c : s) {
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (!IsDigit(c) || ++digits > kMaxDigits) return std::nullopt;
    num = num * 10 + static_cast<unsigned>(c - '0');
    if (point) den *= 10;
  }
  if (digits == 0) return std::nullopt;
  return Reduced(negative, num, den);
}

std::optional<Rational> ParseRational(std::string_view s) {
  bool negative = TakeSign(&s);
  std::string_view a, b;
  if (!SplitFrac(s, &a, &b)) {
    size_t slash = s.find('/');
    if (slash == std::string_view::npos) {
      if (!s.empty() && (s.front() == '-' || s.front() == '+')) return std::nullopt;  // "--5"
      auto r = ParseDecimal(s);
      if (r) r->negative = negative && r->num != 0;
      return r;
    }
    a = s.substr(0, slash);
    b = s.substr(slash + 1);
  }
  auto ra = ParseDecimal(a), rb = ParseDecimal(b);
  if (!ra || !rb) return std::nullopt;
  auto r = Divide(*ra, *rb);
  if (r) r->negative = r->num != 0 && (r->negative != negative);
  return r;
}

std::string CanonicalString(const Rational& r) {
  std::string sign = r.negative ? "-" : "";
  if (r.den == 1) return sign + ToDecimal(r.num);
  // A terminating decimal when den = 2^x 5^y: scale to 10^max(x, y).
  U128 d = r.den;
  size_t twos = 0, fives = 0;
  for (; d % 2 == 0; d /= 2) ++twos;
  for (; d % 5 == 0; d /= 5) ++fives;
  size_t places = twos > fives ? twos : fives;
  if (d == 1 && places <= kMaxDigits) {
    U128 scale = 1;
    for (size_t i = 0; i < places; ++i) scale *= 10;
    if (auto scaled = Mul(r.num, scale / r.den)) {
      std::string digits = ToDecimal(*scaled);
      if (digits.size() <= places) digits.insert(0, places + 1 - digits.size(), '0');
      digits.insert(digits.size() - places, ".");
      return sign + digits;
    }
  }
  return sign + ToDecimal(r.num) + "/" + ToDecimal(r.den);
}

}  // namespace rl::task
