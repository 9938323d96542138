// The property suite's main: GoogleTest's, with RapidCheck on a fixed seed and 500 cases per property
// unless RC_PARAMS says otherwise. RapidCheck draws a new seed every run by default; `make test` must
// fail or pass the same way every time, so CI runs the same cases, and a developer explores new ones
// with RC_PARAMS="seed=N max_success=3000" (docs/robustness.md, "Properties"). With RC_PARAMS set, it
// is used as given (without a seed in it, RapidCheck's random one; without max_success, its 100).
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("RC_PARAMS", "seed=20261125 max_success=500", /*overwrite=*/0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
