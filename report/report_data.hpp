// The page's data block (schema kvsim.report/1): every input as the JSON the CLI wrote it (a CSV as
// columns and rows), checked for the fields the page reads, and the warnings the page shows. The page's
// script draws every chart from this block alone, so a test can check a report without a browser.
#pragma once
#include <nlohmann/json.hpp>

#include "report/sources.hpp"

namespace kvsim::report {

// {"schema", "sources": {kind: name}, "plan", "sweep", "pareto", "serve", "requests", "series",
//  "replay" (null where not given), "warnings": [{"source", "kind", "policy", "context_tokens", "text",
//  "phases"}]}. JSON inputs as read; CSV inputs as {"file", "columns", "rows"}, except "series": only
//  the iterations where the queue or the batch changes (report_data.cpp, queue_changes).
// InputError (file, field, value, what is allowed) for an input of the wrong shape, or none at all.
nlohmann::json report_data(const ReportInputs& in);

}  // namespace kvsim::report
