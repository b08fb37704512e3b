// Exact rationals for comparing math answers: "2.50", "-3/4", "\frac{1}{2}" read without
// rounding, and written back in one canonical form, so that equal values give equal strings.
// Numerator and denominator are 128-bit: a number with more than 36 digits is not read (the
// caller then compares it as a string).
// Thread safety: values.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rl::task {

struct Rational {
  bool negative = false;
  unsigned __int128 num = 0;  // reduced with den; 0 is never negative
  unsigned __int128 den = 1;  // > 0
};

// A decimal: optional sign, digits with an optional fraction ("12", "-2.50", ".5", "+3.").
std::optional<Rational> ParseDecimal(std::string_view s);
// A decimal, "a/b" or "\frac{a}{b}" with decimals a and b, with an optional sign in front and
// on each of a and b. No white space; b must not be 0.
std::optional<Rational> ParseRational(std::string_view s);
// "3", "-2.5", "0.5" when the value is a terminating decimal, else "p/q" ("-1/3").
std::string CanonicalString(const Rational& r);

}  // namespace rl::task
