// `kvsim ui`: starts the local interactive planner, which is Python (python -m kvsim.ui, docs/ui.md);
// this command only finds the module and hands over to it.
#pragma once
#include <CLI/CLI.hpp>

namespace kvsim {

struct UiCommand;

UiCommand* add_ui_command(CLI::App& app);
// Replaces this process with `python3 -m kvsim.ui ARGS...` when `kvsim ui` was given; -1 when it was not.
int run_ui_command(UiCommand& c);

}  // namespace kvsim
