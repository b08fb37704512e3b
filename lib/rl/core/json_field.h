// Fields of JSON objects that came from outside: event logs, state files, a checkpoint's extra
// record, a tokenizer_config.json, a server's stat reply. Each returns the field when it holds
// the type asked for and the default otherwise (no such key, another type, not an object).
//
// Why not nlohmann's j.value(key, default): it throws type_error when the key is there with
// another type ({"event": 5}), and nothing catches it, so one hand-edited or foreign line ended
// the tool with std::terminate. A reader that must tell "missing" from "wrong" checks contains()
// and the type itself and says what is wrong.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace rl {

// J: nlohmann::json or nlohmann::ordered_json.
template <typename J>
const J* FieldOf(const J& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

template <typename J>
std::string TextField(const J& j, const char* key, const std::string& otherwise = "") {
  const J* f = FieldOf(j, key);
  return f != nullptr && f->is_string() ? f->template get<std::string>() : otherwise;
}

// Any number (an integer field read as a double too).
template <typename J>
double NumberField(const J& j, const char* key, double otherwise) {
  const J* f = FieldOf(j, key);
  return f != nullptr && f->is_number() ? f->template get<double>() : otherwise;
}

// An integer that fits int64 (not 2.5, not 2^63).
template <typename J>
int64_t IntField(const J& j, const char* key, int64_t otherwise) {
  const J* f = FieldOf(j, key);
  if (f == nullptr || !f->is_number_integer()) return otherwise;
  if (f->is_number_unsigned() && f->template get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return otherwise;
  return f->template get<int64_t>();
}

// A non-negative integer.
template <typename J>
uint64_t UintField(const J& j, const char* key, uint64_t otherwise) {
  const J* f = FieldOf(j, key);
  if (f == nullptr || !f->is_number_integer()) return otherwise;
  if (f->is_number_unsigned()) return f->template get<uint64_t>();
  const int64_t v = f->template get<int64_t>();
  return v < 0 ? otherwise : static_cast<uint64_t>(v);
}

template <typename J>
bool BoolField(const J& j, const char* key, bool otherwise) {
  const J* f = FieldOf(j, key);
  return f != nullptr && f->is_boolean() ? f->template get<bool>() : otherwise;
}

// The field when it is an array, an object: otherwise an empty one of that kind (a static, so
// that a reference to it stays valid).
template <typename J>
const J& ArrayField(const J& j, const char* key) {
  static const J* empty = new J(J::array());
  const J* f = FieldOf(j, key);
  return f != nullptr && f->is_array() ? *f : *empty;
}

template <typename J>
const J& ObjectField(const J& j, const char* key) {
  static const J* empty = new J(J::object());
  const J* f = FieldOf(j, key);
  return f != nullptr && f->is_object() ? *f : *empty;
}

// j as one line of JSON text; bytes in its strings that are not UTF-8 (file names, a model's
// output) become U+FFFD where dump() would throw type_error 316.
template <typename J>
std::string JsonText(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

}  // namespace rl
