#include "report/sources.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/csv.hpp"
#include "core/error.hpp"

namespace kvsim::report {

using json = nlohmann::json;

Source read_source_file(const std::string& path, const std::string& option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error("command line", 0, option, "value '" + path + "': cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return {path, ss.str()};
}

json parse_json_source(const Source& s, const std::string& schema) {
  json j;
  try {
    j = json::parse(s.text);
  } catch (const json::parse_error& e) {
    throw_input_error(s.name, 0, "(json)", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw_input_error(s.name, 0, "(top level)", "is " + std::string(j.type_name()) + "; allowed: a JSON object");
  if (!schema.empty()) {
    const json& v = j.contains("schema") ? j["schema"] : json();
    if (!v.is_string() || v.get<std::string>() != schema)
      throw_input_error(s.name, 0, "schema", "value " + (v.is_null() ? std::string("(missing)") : v.dump()) +
                                                 "; allowed: \"" + schema + "\"");
  }
  return j;
}

namespace {

// A cell: a finite number when the whole field reads as one, null when empty, else the text.
json cell(const std::string& f) {
  if (f.empty()) return nullptr;
  double v = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (ec == std::errc() && end == f.data() + f.size() && std::isfinite(v)) return v;
  return f;
}

}  // namespace

json parse_csv_source(const Source& s, const std::vector<std::string>& required) {
  std::istringstream in(s.text);
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  json rows = json::array();
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> fields = split_line(line);
    if (header.empty()) {
      header = std::move(fields);
      continue;
    }
    if (fields.size() != header.size())
      throw_input_error(s.name, line_no, "(row)", std::to_string(fields.size()) + " fields; allowed: " +
                                                      std::to_string(header.size()) + ", as many as the header");
    json row = json::array();
    for (const std::string& f : fields) row.push_back(cell(f));
    rows.push_back(std::move(row));
  }
  if (header.empty()) throw_input_error(s.name, 1, "(header)", "the file is empty; allowed: a CSV file with a header line");
  for (const std::string& r : required)
    if (std::find(header.begin(), header.end(), r) == header.end())
      throw_input_error(s.name, 1, r, "missing column" + suggestion(r, header) + "; columns: " + join(header));
  return {{"file", s.name}, {"columns", header}, {"rows", std::move(rows)}};
}

}  // namespace kvsim::report
