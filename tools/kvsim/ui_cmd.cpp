#include "tools/kvsim/ui_cmd.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace kvsim {

struct UiCommand {
  CLI::App* cmd = nullptr;
};

UiCommand* add_ui_command(CLI::App& app) {
  static UiCommand c;
  c.cmd = app.add_subcommand("ui", "the local interactive planner in your browser: python -m kvsim.ui "
                                   "[--host 127.0.0.1] [--port 8765] (docs/ui.md)");
  // Every argument, --help included, is the Python program's (its argparse lists --host and --port).
  c.cmd->set_help_flag();
  c.cmd->allow_extras();
  c.cmd->prefix_command();
  return &c;
}

int run_ui_command(UiCommand& c) {
  if (!c.cmd->parsed()) return -1;
  // In a build tree the module sits in python/ beside this binary; put it first on PYTHONPATH. An
  // installed kvsim (pip install .) is found without it.
  std::error_code ec;
  const std::filesystem::path here = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec && std::filesystem::exists(here / "python" / "kvsim" / "ui.py")) {
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = (here / "python").string() + (old && *old ? std::string(":") + old : std::string());
    setenv("PYTHONPATH", path.c_str(), 1);
  }
  // Debian's python3 (where install-deps puts Flask and plotly) unless KVSIM_PYTHON names another.
  const char* env = std::getenv("KVSIM_PYTHON");
  const std::string python = env && *env ? env : std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::vector<std::string> args = {python, "-m", "kvsim.ui"};
  for (const std::string& a : c.cmd->remaining()) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "kvsim: error: ui: cannot start %s (%s); run python3 -m kvsim.ui (docs/ui.md)\n", python.c_str(),
               std::strerror(errno));
  return 3;
}

}  // namespace kvsim
