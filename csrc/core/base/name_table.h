// One table of names per enum, used both to parse (environment variables)
// and to print (logs, errors): each spelling exists in one place, and a
// value added to an enum gets its name where it is declared.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ringreduce {

template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

// Specialised beside each enum, with
//   static constexpr NamedValue<E> entries[] = {{E::A, "a"}, ...};
// in the order error messages list the choices.
template <typename E>
struct NameTable;

template <typename E>
const char* nameOf(E value) {
  for (const NamedValue<E>& entry : NameTable<E>::entries) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

// The value whose name is exactly `text`; none for anything else.
template <typename E>
std::optional<E> parseName(std::string_view text) {
  for (const NamedValue<E>& entry : NameTable<E>::entries) {
    if (text == entry.name) return entry.value;
  }
  return std::nullopt;
}

// Every name in table order, comma separated: "auto, oneshot, ...".
template <typename E>
std::string listNames() {
  std::string listed;
  for (const NamedValue<E>& entry : NameTable<E>::entries) {
    listed += std::string(listed.empty() ? "" : ", ") + entry.name;
  }
  return listed;
}

}  // namespace ringreduce
