#include "model/implementation.hpp"

#include <algorithm>

#include "model/library.hpp"

namespace kvsim {

namespace {
// The host-device sync fields of an eager profile (Implementation's comments). Each count is a part of
// the total it is read against: a part larger than its whole is an error naming both.
void load_syncs(YamlMap& m, Implementation& impl) {
  impl.ops_before_layers = m.number("ops_before_layers", Range::between(0, impl.ops_per_step), 0.0);
  impl.kernels_before_layers = m.number(
      "kernels_before_layers", Range::between(0, std::min(impl.kernels_per_step, impl.ops_before_layers)), 0.0);
  impl.sync_per_layer = m.boolean("sync_per_layer", false);
  if (impl.sync_per_layer) {
    // The sync operator itself is one of the operators before it, so at least one.
    impl.ops_before_sync = m.number("ops_before_sync", Range::between(1, impl.ops_per_layer));
    impl.kernels_before_sync = m.number(
        "kernels_before_sync", Range::between(0, std::min(impl.kernels_per_layer, impl.ops_before_sync)));
  } else {
    for (const char* k : {"ops_before_sync", "kernels_before_sync"})
      if (m.has(k)) m.fail(k, "applies only with sync_per_layer: true");
  }
}
}  // namespace

Implementation load_implementation(YamlMap m) {
  Implementation impl;
  impl.kv_expand_gqa = m.boolean("kv_expand_gqa", false);
  impl.prefill_whole_prompt = m.choice("prefill", {"chunked", "whole"}, "chunked") == "whole";
  impl.kv_append_concat = m.choice("kv_append", {"in_place", "concat"}, "in_place") == "concat";
  impl.attention_repeat_kv = m.choice("attention", {"fused_gqa", "repeat_kv"}, "fused_gqa") == "repeat_kv";
  impl.dispatch_eager = m.choice("dispatch", {"engine", "eager"}, "engine") == "eager";
  if (impl.dispatch_eager) {
    impl.ops_per_layer = m.number("ops_per_layer", Range::at_least(1, 1e5));
    impl.kernels_per_layer = m.number("kernels_per_layer", Range::between(0, impl.ops_per_layer));
    impl.ops_per_step = m.number("ops_per_step", Range::between(0, 1e5), 0.0);
    impl.kernels_per_step = m.number("kernels_per_step", Range::between(0, impl.ops_per_step), 0.0);
    impl.dispatch_us = m.number("dispatch_us", Range::positive(1e5));
    impl.loop_us = m.number("loop_us", Range::between(0, 1e6), 0.0);
    if (m.has("measured_on")) {
      const YAML::Node on = m.node("measured_on");
      if (!on.IsScalar()) m.fail("measured_on", "expected the name of the host dispatch_us was measured on (scenarios/hosts/)");
      impl.dispatch_clock_hz =
          load_host_file(resolve(LibraryKind::host, on.Scalar(), m.file(), m.line_of("measured_on"), m.field("measured_on")))
              .clock_hz;
    }
    load_syncs(m, impl);
  } else {
    for (const char* k : {"ops_per_layer", "kernels_per_layer", "ops_per_step", "kernels_per_step", "dispatch_us",
                          "loop_us", "ops_before_layers", "kernels_before_layers", "sync_per_layer",
                          "ops_before_sync", "kernels_before_sync", "measured_on"})
      if (m.has(k)) m.fail(k, "applies only with dispatch: eager");
  }
  if (m.choice("host_ops", {"native", "framework"}, "native") == "framework") {
    const YAML::Node n = m.node("host_profile");
    if (!n || !n.IsScalar())
      m.fail("host_profile", "host_ops: framework needs host_profile: a measured profile's name (scenarios/host-ops/) or path");
    impl.host_ops = std::make_shared<const HostOpsProfile>(
        load_host_ops_file(resolve(LibraryKind::host_ops, n.Scalar(), m.file(), m.line_of("host_profile"),
                                   m.field("host_profile"))));
  } else if (m.has("host_profile")) {
    m.fail("host_profile", "applies only with host_ops: framework");
  }
  m.finish();
  return impl;
}

void apply_implementation(Deployment& d, const Implementation& impl) {
  if (impl.kv_expand_gqa) d.hkv_cached = d.hq;
  if (impl.prefill_whole_prompt) d.prefill_chunk_tokens = 0;
  d.kv_append_concat = impl.kv_append_concat;
  d.attention_repeat_kv = impl.attention_repeat_kv;
  if (impl.dispatch_eager) {
    // The host pays the dispatch and the launch call per operator; the GPU pays only its own
    // per-kernel gap (the in-graph latency), since the host-side launch cost is on the dispatch stream.
    // Measured on another host: scaled by one core's clock (the target's over the measuring host's).
    const double slow = clock_time_scale(impl.dispatch_clock_hz, d.host ? d.host->clock_hz : 0);
    const double op = impl.dispatch_us * 1e-6 * slow, launch = d.gpu->host_launch_latency;
    d.machine.dispatch_layer_s = impl.ops_per_layer * op + impl.kernels_per_layer * launch;
    d.machine.dispatch_step_s = impl.ops_per_step * op + impl.kernels_per_step * launch + impl.loop_us * 1e-6 * slow;
    d.machine.dispatch_step_pre_s = impl.ops_before_layers * op + impl.kernels_before_layers * launch;
    d.machine.sync_per_layer = impl.sync_per_layer;
    d.machine.dispatch_layer_pre_sync_s = impl.ops_before_sync * op + impl.kernels_before_sync * launch;
    d.machine.kernel_latency = d.gpu->kernel_latency;
  }
  if (impl.host_ops) {
    HostOpsOnTarget t;
    t.profile = impl.host_ops;
    const double measured = impl.host_ops->measured_on.clock_hz, target = d.host ? d.host->clock_hz : 0;
    t.clock_known = measured > 0 && target > 0;
    t.time_scale = clock_time_scale(measured, target);
    // The rate is multi-threaded work: all-core clocks (the single-core one where a host gives none).
    const HostSpec& on = impl.host_ops->measured_on;
    t.all_core_known = on.all_core_clock_hz > 0 && d.host && d.host->all_core_clock_hz > 0;
    t.rate_time_scale = clock_time_scale(on.all_core_or_single_clock(), d.host ? d.host->all_core_or_single_clock() : 0);
    d.machine.host_ops = std::make_shared<const HostOpsOnTarget>(std::move(t));
  }
}

}  // namespace kvsim
