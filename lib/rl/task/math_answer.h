// Final answers of math responses (GSM8K, MATH, DeepScaleR style): extraction from a response
// and normalization to a canonical string, so that two answers match when their canonical
// strings are equal. The `math` verifier of rl-reward is MathReward.
//
// Extraction (ExtractMathAnswer), first rule that applies:
//   1. the argument of the last complete \boxed{...} or \fbox{...} (nested braces counted,
//      \{ and \} not), or of `\boxed 5` (the token after the space, up to white space or $);
//      an unclosed \boxed{ at the end (a truncated response) is passed over;
//   2. the rest of the line after the last "####" (GSM8K), when not empty;
//   3. the last number of the text: digits with thousands groups ("1,234"; "1,2" is two
//      numbers), a decimal part ("2.5"), a sign ("-3" unless right after a letter or digit), and
//      a numerator ("3/4").
// Normalization (NormalizeMathAnswer), in order:
//   - LaTeX: \left \right \displaystyle \! \, \; \: \quad dropped; \dfrac \tfrac -> \frac;
//     \frac12 -> \frac{1}{2}; \text{..} \textbf{..} \mathrm{..} \mbox{..} \textit{..}
//     \mathbf{..} \operatorname{..} -> their content after a space; \$ \% -> $ %;
//     ^\circ ^{\circ} \circ \degree and the degree sign dropped; {,} -> ",";
//     the Unicode minus sign -> "-";
//   - every $ and % dropped; white space at the ends and trailing dots dropped;
//   - "x = 5" -> "5" (one letter then "=");
//   - a number followed by white space and a unit ("19 apples", "12 cm^2", "5 m/s") -> the number;
//   - all white space dropped; braces around the whole dropped;
//   - a number: thousands separators dropped when every group after the first has 3 digits
//     ("1,234" -> 1234), decimals, a/b, \frac{a}{b}, signs anywhere ("-\frac{1}{2}",
//     "\frac{-1}{2}") are read as an exact rational and written canonically: an integer ("3"),
//     else a decimal when it terminates ("2.5", "0.5" for 1/2), else "p/q" reduced ("1/3").
//     So 1/2 == 0.5 == \frac12 == 0.50, but 3/4 != 0.76 and 1/3 != 0.333;
//   - a tuple or interval "(a, b)" / "[a,b)": each element normalized as above;
//   - "(B)" -> "B" (a single-letter choice); anything else is compared as the string it became.
// Thread safety: free functions over values.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rl/core/status.h"

namespace rl::task {

// The argument of the last complete \boxed / \fbox in `text`, unnormalized.
std::optional<std::string> LastBoxed(std::string_view text);
// The final answer of a response by the extraction rules above, unnormalized; nullopt when the
// text has none (no box, no ####, no digit).
std::optional<std::string> ExtractMathAnswer(std::string_view text);
// The canonical form of an answer (already extracted) by the normalization rules above.
std::string NormalizeMathAnswer(std::string_view answer);
// The reference as compared: the extracted answer when the reference itself has a \boxed,
// \fbox or "####" (a worked solution), else the whole reference; normalized.
std::string NormalizeReference(std::string_view reference);
// 1 when the response's final answer matches the reference, else 0. DataError when the
// reference is empty once normalized (the row cannot be scored).
Result<double> MathReward(std::string_view response, std::string_view reference);

}  // namespace rl::task
