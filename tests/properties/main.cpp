// The property suite's main: GoogleTest's, with RapidCheck on a fixed seed unless RC_PARAMS says
// otherwise. RapidCheck draws a new seed every run by default; `make test` must fail or pass the same
// way every time, so CI runs the same cases, and a developer explores new ones with
// RC_PARAMS="seed=N max_success=1000" (docs/robustness.md, "Properties"). With RC_PARAMS set, its
// seed (or RapidCheck's random one) is used as given.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("RC_PARAMS", "seed=20261125", /*overwrite=*/0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
