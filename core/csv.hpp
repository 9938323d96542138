// The few CSV rules results files need (RFC 4180): a field with a comma, a quote or a line break is
// quoted, quotes doubled. Numbers are written in the shortest text that reads back to the same double
// (std::to_chars), so a results file round-trips exactly and costs no printf in the per-point path.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvsim {

void append_field(std::string& out, std::string_view text);  // quoted when it needs to be
std::string csv_field(std::string_view text);                 // the same, as a string
void append_number(std::string& out, double v);
void append_integer(std::string& out, int64_t v);
void append_hex(std::string& out, uint64_t v);                // 16 lowercase hex digits

// Splits one line (without its newline) into fields, unquoting them.
std::vector<std::string> split_line(std::string_view line);

// Splits one line into views of its fields without copying or unquoting (a quoted field keeps its
// quotes): enough for numeric and name columns, and allocation-free when `out` is reused.
void split_views(std::string_view line, std::vector<std::string_view>& out);

// The first field of a line (unquoted), cheaply: results files start with the point number.
std::string_view first_field(std::string_view line);

}  // namespace kvsim
