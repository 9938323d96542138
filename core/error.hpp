// Errors kvsim reports to users. Every input problem becomes an InputError whose message names the
// file, the line, the field, the offending value and what is allowed, so a user can fix the input
// without reading our code. The CLI prints it and exits nonzero; nothing is half-written.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace kvsim {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
  // The parts throw_input_error was given (what() is them formatted), for callers that present them
  // separately (the Python module's exception attributes). Empty / 0 when constructed from text.
  std::string file, field, message;
  int line = 0;
};

// "file:line: field: message". line <= 0 means "no line" (e.g. a command-line option).
[[noreturn]] void throw_input_error(const std::string& file, int line, const std::string& field,
                                    const std::string& message);

// Closest candidate by edit distance, or "" when nothing is close enough to be a plausible typo.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'X'?)" when a candidate is close, else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates);

// "a, b, c", or `empty` for no items.
std::string join(const std::vector<std::string>& items, const std::string& empty = "(none)");

}  // namespace kvsim
