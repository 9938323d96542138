// `kvsim serve [SCENARIO]`: requests over time through a continuous-batching engine per policy
// (serve/serve.hpp), and `kvsim capacity [SCENARIO] --rate R --slo-ttft-p99 T --slo-tpot-p99 T`: the
// fewest GPUs per policy (serve/capacity.hpp). docs/serving.md.
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct ServeCommands;
ServeCommands* add_serve_commands(CLI::App& app);
// The exit status, or -1 when neither subcommand was given. Input errors propagate as InputError.
int run_serve_commands(ServeCommands& c);

}  // namespace kvsim
