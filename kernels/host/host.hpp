// kvsim::host — the optimized host kernels (kernels/host/README.md): the phases trace replay and the
// CPU side of the offloading policies run, written for this CPU's SIMD units and caches. Selection
// inputs are bit-identical to kvsim::ref's; attention outputs agree to float rounding.
#pragma once
#include "kernels/host/attention.hpp"
#include "kernels/host/chess.hpp"
#include "kernels/host/ctkvr.hpp"
#include "kernels/host/dots.hpp"
#include "kernels/host/gather.hpp"
#include "kernels/host/group_softmax.hpp"
#include "kernels/host/lowrank.hpp"
#include "kernels/host/quest.hpp"
#include "kernels/host/select.hpp"
#include "kernels/host/window.hpp"
