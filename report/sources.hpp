// What a report is made from: the files the other commands write, each as its name (for error
// messages and the page) and its text. The CLI reads them from disk; Python passes loaded objects as
// text. `read_source` checks each one's shape and turns it into the JSON the page embeds.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::report {

struct Source {
  std::string name;  // a path, or what the caller calls it ("plan (a dict)")
  std::string text;
};

// The inputs of one report; any combination of kinds, at least one.
struct ReportInputs {
  std::optional<Source> plan;      // `kvsim plan --format json` (kvsim.plan/1)
  std::optional<Source> sweep;     // `kvsim sweep -o S.csv`: the results file
  std::optional<Source> pareto;    // ... and its S.pareto.csv
  std::optional<Source> serve;     // `kvsim serve --format json`: the summary
  std::optional<Source> requests;  // `kvsim serve --requests-csv`: one row per request
  std::optional<Source> series;    // `kvsim serve --series`: one row per iteration
  std::optional<Source> replay;    // `kvsim replay --format json` (kvsim.replay/1)
};

// The file at `path` as a Source (InputError naming the path and the option when it cannot be read).
Source read_source_file(const std::string& path, const std::string& option);

// A JSON input: parsed, an object, and (when `schema` is not empty) carrying that schema.
nlohmann::json parse_json_source(const Source& s, const std::string& schema);

// A CSV input as the page embeds it: {"file", "columns": [...], "rows": [[cell, ...], ...]}, a cell a
// number where the whole field reads as one, null where empty, else the text. Every name in
// `required` must be a column, and every row must have as many fields as the header.
nlohmann::json parse_csv_source(const Source& s, const std::vector<std::string>& required);

}  // namespace kvsim::report
