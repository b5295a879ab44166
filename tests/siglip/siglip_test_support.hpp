// Helpers of the SigLIP suites: runtime configurations for a reference tower,
// running items through the runtime, and one forward through the plugin's ABI
// with NaN in every padding byte (scratch folders and error norms:
// plugin_test_support.hpp).
#pragma once

#include "../plugin_test_support.hpp"
#include "../test_support.hpp"
#include "siglip_reference.hpp"

#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <encoder_kit/numeric.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace siglip_test {

using encgraph::test::all_finite;
using encgraph::test::rel_error;
using encgraph::test::TempDir;

using KeyValues = std::vector<std::pair<std::string, std::string>>;

inline encgraph::RuntimeConfig runtime_config(const KeyValues& kv, const std::string& device,
                                              const std::string& weights) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "siglip";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = device;
  rc.weights = weights;
  rc.plugin_config = kv;
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;  // batches that fit a graph replay it: hit counts stay exact
  return rc;
}

inline eg_item_desc pixel_item(const std::vector<uint8_t>& px, int64_t h, int64_t w,
                               int32_t channels = 3) {
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = channels;
  d.height = h;
  d.width = w;
  d.frames = 1;
  d.pixels = px.data();
  return d;
}

// Every item's rows as float, in the order given.
inline std::vector<std::vector<float>> run(encgraph::RuntimeConfig rc,
                                           const std::vector<eg_item_desc>& descs, bool graphs,
                                           encgraph::Stats* stats = nullptr) {
  rc.use_graphs = graphs;
  encgraph::Runtime rt(rc);
  if (graphs) rt.capture();
  std::vector<encgraph::Item> items;
  for (const eg_item_desc& d : descs) items.push_back(rt.make_item(d));
  const encgraph::Result r = rt.execute(items);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < items.size(); ++i) out.push_back(r.item_as_float(i));
  if (stats) *stats = rt.stats();
  return out;
}

// Every output's rows of every item as float: [output][item].
inline std::vector<std::vector<std::vector<float>>> run_outputs(
    encgraph::RuntimeConfig rc, const std::vector<eg_item_desc>& descs, bool graphs) {
  rc.use_graphs = graphs;
  encgraph::Runtime rt(rc);
  if (graphs) rt.capture();
  std::vector<encgraph::Item> items;
  for (const eg_item_desc& d : descs) items.push_back(rt.make_item(d));
  const encgraph::Result r = rt.execute(items);
  std::vector<std::vector<std::vector<float>>> out(r.num_outputs());
  for (size_t o = 0; o < r.num_outputs(); ++o)
    for (size_t i = 0; i < items.size(); ++i) out[o].push_back(r.item_as_float(i, o));
  return out;
}

// Memory of the instance's device, as the runtime would hand it over.
struct DeviceOps {
  int32_t device = EG_DEVICE_CPU;
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> release;
  std::function<void(void*, const void*, size_t)> upload;    // dst device, src host
  std::function<void(void*, const void*, size_t)> download;  // dst host, src device
  std::function<void(void*, size_t)> poison;                 // 0xFF bytes: NaN in f32 and bf16
};

inline DeviceOps host_ops() {
  DeviceOps ops;
  ops.alloc = [](size_t n) { return std::malloc(n); };
  ops.release = [](void* p) { std::free(p); };
  ops.upload = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
  ops.download = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
  ops.poison = [](void* p, size_t n) { std::memset(p, 0xFF, n); };
  return ops;
}

// One batch through the plugin's ABI as the runtime replays a graph of
// `budget`, except that the padded pixel rows, the output and the workspace
// hold NaN instead of zeros and stale values. Returns each item's rows.
inline std::vector<std::vector<float>> forward_with_nan_padding(
    const DeviceOps& ops, const KeyValues& kv, const std::vector<eg_item_desc>& descs,
    int64_t budget, int64_t max_batch_size) {
  encgraph::PluginRegistry registry(encgraph::test::plugin_dirs());
  const eg_plugin_api* api = registry.get("siglip").api;
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = ops.device;
  p.weights = "random";
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  eg_error err{};
  eg_instance* inst = nullptr;
  auto ok = [&](eg_status s) {
    if (s != EG_OK) throw std::runtime_error(err.message);
  };
  ok(api->create(&p, &inst, &err));
  std::unique_ptr<eg_instance, void (*)(eg_instance*)> guard(inst, api->destroy);
  std::vector<eg_item*> items;
  std::vector<void*> allocations;
  auto cleanup = [&] {
    for (eg_item* it : items) api->item_destroy(inst, it);
    for (void* a : allocations) ops.release(a);
  };
  std::vector<std::vector<float>> result;
  try {
    std::vector<int64_t> rows_of;
    for (const eg_item_desc& d : descs) {
      eg_item* it = nullptr;
      ok(api->item_create(inst, &d, &it, &err));
      items.push_back(it);
      eg_item_spec spec{};
      ok(api->item_spec(inst, it, &spec, &err));
      rows_of.push_back(spec.output_tokens);
    }
    eg_model_info info{};
    info.struct_size = sizeof(info);
    ok(api->model_info(inst, &info, &err));
    eg_graph_shape shape{};
    shape.token_budget = budget;
    shape.max_batch_size = max_batch_size;
    std::vector<std::vector<uint8_t>> host(static_cast<size_t>(info.num_buffers));
    std::vector<eg_tensor> dev(static_cast<size_t>(info.num_buffers));
    std::vector<eg_replay_buffer> replay(static_cast<size_t>(info.num_buffers));
    for (int b = 0; b < info.num_buffers; ++b) {
      ok(api->buffer_shape(inst, &shape, b, &dev[b], &err));
      dev[b].dtype = info.buffers[b].dtype;
      dev[b].device = ops.device;
      size_t bytes = encoder_kit::dtype_bytes(info.buffers[b].dtype);
      for (int d = 0; d < dev[b].ndim; ++d) bytes *= static_cast<size_t>(dev[b].shape[d]);
      host[b].assign(bytes, 0xFF);
      dev[b].data = ops.alloc(bytes);
      allocations.push_back(dev[b].data);
      replay[b].staging = dev[b];
      replay[b].staging.data = host[b].data();
      replay[b].staging.device = EG_DEVICE_CPU;
      replay[b].rows = -1;
    }
    std::vector<const eg_item*> citems(items.begin(), items.end());
    ok(api->prepare_replay_buffers(inst, &shape, citems.data(), static_cast<int64_t>(citems.size()),
                                   replay.data(), info.num_buffers, &err));
    for (int b = 0; b < info.num_buffers; ++b) {
      if (info.buffers[b].padding_logic == EG_PAD_REPEAT_LAST) {  // offsets as the runtime pads
        auto* v = reinterpret_cast<int32_t*>(host[b].data());
        for (int64_t r = replay[b].rows; r < dev[b].shape[0]; ++r) v[r] = v[replay[b].rows - 1];
      }  // other buffers keep 0xFF (NaN) past the real rows
      ops.upload(dev[b].data, host[b].data(), host[b].size());
    }
    eg_tensor out{};
    ok(api->output_shape(inst, &shape, &out, &err));
    const size_t es = encoder_kit::dtype_bytes(info.out_dtype);
    const size_t out_bytes = static_cast<size_t>(out.shape[0] * out.shape[1]) * es;
    size_t ws = 0;
    ok(api->workspace_size(inst, &shape, &ws, &err));
    out.data = ops.alloc(out_bytes);
    allocations.push_back(out.data);
    out.dtype = info.out_dtype;
    out.device = ops.device;
    void* ws_mem = ops.alloc(ws);
    allocations.push_back(ws_mem);
    ops.poison(out.data, out_bytes);
    ops.poison(ws_mem, ws);
    eg_forward_args args{};
    args.shape = shape;
    args.buffers = dev.data();
    args.num_buffers = info.num_buffers;
    args.output = out;
    args.workspace = ws_mem;
    args.workspace_size = ws;
    ok(api->forward(inst, &args, &err));
    std::vector<uint8_t> raw(out_bytes);
    ops.download(raw.data(), out.data, out_bytes);
    size_t value = 0;
    for (int64_t rows : rows_of) {
      std::vector<float> v(static_cast<size_t>(rows * info.out_hidden_size));
      for (float& f : v) {
        const uint8_t* src = raw.data() + value++ * es;
        if (es == 4) {
          std::memcpy(&f, src, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, src, 2);
          f = encoder_kit::bf16_to_f32(h);
        }
      }
      result.push_back(std::move(v));
    }
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return result;
}

}  // namespace siglip_test
