// Text for the JSON files we write (the flight recorder, the timeline):
// a string as a JSON string literal.
#pragma once

#include <string>

namespace ringreduce {

// `text` in double quotes, with quotes, backslashes and control characters escaped.
std::string jsonQuoted(const std::string& text);

}  // namespace ringreduce
