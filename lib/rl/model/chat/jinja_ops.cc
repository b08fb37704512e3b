#include "rl/model/chat/jinja_ops.h"

#include <cmath>

#include "rl/model/chat/jinja_filters.h"
#include "rl/model/chat/jinja_methods.h"

namespace rl::chat::jinja {
namespace {

bool Numeric(const Value& v) { return v.is_data() && (v.data().is_number() || v.data().is_boolean()); }
bool IntLike(const Value& v) { return v.is_data() && IsInt(v.data()); }
double AsDouble(const Value& v) {
  return v.data().is_boolean() ? (v.data().get<bool>() ? 1.0 : 0.0) : v.data().get<double>();
}

Status Unsupported(const std::string& op, const Value& a, const Value& b) {
  return Status::DataError("unsupported operand type(s) for " + op + ": '" + TypeName(a) + "' and '" + TypeName(b) + "'");
}

Status Overflow() { return Status::DataError("integer overflow (beyond 64 bits)"); }

Result<Value> IntOp(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) return Overflow();
  } else if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) return Overflow();
  } else if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) return Overflow();
  } else if (op == "/") {
    if (y == 0) return Status::DataError("division by zero");
    return Value(static_cast<double>(x) / static_cast<double>(y));
  } else if (op == "//" || op == "%") {
    if (y == 0) return Status::DataError("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return op == "%" ? Value(int64_t{0}) : Result<Value>(Overflow());
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    r = op == "//" ? q : m;
  } else if (op == "**") {
    if (y < 0) {
      if (x == 0) return Status::DataError("0.0 cannot be raised to a negative power");
      return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
    r = 1;
    for (int64_t i = 0; i < y; ++i) {
      if (__builtin_mul_overflow(r, x, &r)) return Overflow();
      if (r == 0 || r == 1) break;
      if (r == -1) {
        r = ((y - i - 1) % 2 == 0) ? -1 : 1;
        break;
      }
    }
  }
  return Value(r);
}

Result<Value> FloatOp(const std::string& op, double x, double y) {
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) return Status::DataError("float division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return Status::DataError(op == "%" ? "float modulo" : "float floor division by zero");
    // CPython's float_divmod.
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    double floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, x / y);
    }
    return Value(op == "//" ? floordiv : mod);
  }
  if (x == 0 && y < 0) return Status::DataError("0.0 cannot be raised to a negative power");
  return Value(std::pow(x, y));
}

Result<Value> Repeat(const Value& seq, const Value& times) {
  int64_t n = std::max<int64_t>(0, AsInt64(times.data()));
  const Json& d = seq.data();
  size_t unit = d.is_string() ? d.get_ref<const std::string&>().size() : d.size() * 8;
  if (n > 0 && unit > 0 && static_cast<uint64_t>(n) > kMaxValueBytes / unit)
    return Status::DataError("repetition makes a value larger than " + std::to_string(kMaxValueBytes) + " bytes");
  if (d.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += d.get_ref<const std::string&>();
    return Value(out);
  }
  Json out = Json::array();
  for (int64_t i = 0; i < n; ++i)
    for (const auto& e : d) out.push_back(e);
  return Value(out);
}

}  // namespace

Result<Value> BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(PyStr(a) + PyStr(b));
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (Numeric(a) && Numeric(b)) {
    if (IntLike(a) && IntLike(b)) return IntOp(op, AsInt64(a.data()), AsInt64(b.data()));
    return FloatOp(op, AsDouble(a), AsDouble(b));
  }
  if (a.is_data() && b.is_data()) {
    const Json& x = a.data();
    const Json& y = b.data();
    if (op == "+" && x.is_string() && y.is_string()) {
      if (x.get_ref<const std::string&>().size() + y.get_ref<const std::string&>().size() > kMaxValueBytes)
        return Status::DataError("string longer than " + std::to_string(kMaxValueBytes) + " bytes");
      return Value(x.get<std::string>() + y.get_ref<const std::string&>());
    }
    if (op == "+" && x.is_array() && y.is_array()) {
      Json out = x;
      for (const auto& e : y) out.push_back(e);
      return Value(out);
    }
    if (op == "+" && x.is_string())
      return Status::DataError("can only concatenate str (not \"" + TypeName(b) + "\") to str");
    if (op == "*" && (x.is_string() || x.is_array()) && IntLike(b)) return Repeat(a, b);
    if (op == "*" && (y.is_string() || y.is_array()) && IntLike(a)) return Repeat(b, a);
    if (op == "%" && x.is_string()) return Status::DataError("string formatting with % is not supported");
  }
  return Unsupported(op, a, b);
}

Result<Value> UnaryOp(const std::string& op, const Value& a) {
  if (a.is_undefined()) return UndefinedError(a);
  if (!Numeric(a)) return Status::DataError("bad operand type for unary " + op + ": '" + TypeName(a) + "'");
  if (IntLike(a)) {
    int64_t i = AsInt64(a.data());
    if (op == "-" && i == INT64_MIN) return Overflow();
    return Value(op == "-" ? -i : i);
  }
  return Value(op == "-" ? -AsDouble(a) : AsDouble(a));
}

Result<bool> CompareOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return PyEquals(a, b);
  if (op == "!=") return !PyEquals(a, b);
  if (op == "in" || op == "notin") {
    RL_ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return op == "in" ? in : !in;
  }
  if (op == "<") return PyLess(a, b);
  if (op == ">") return PyLess(b, a);
  RL_ASSIGN_OR_RETURN(bool less, op == "<=" ? PyLess(b, a) : PyLess(a, b));
  return !less;
}

}  // namespace rl::chat::jinja
