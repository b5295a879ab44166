// The plugin table from a C++ class: sdk::entry<Model> fills abi_major/minor,
// struct_size, identity and every function pointer, each body run in
// sdk::guard, so a plugin is its model class plus one ENCGRAPH_SDK_PLUGIN line.
//
// The model class is the instance. Required members (names follow the ABI):
//   static constexpr sdk::Identity identity{name, version, description, modalities, devices};
//   struct Item { ... };                                  // the plugin's item
//   explicit Model(sdk::CreateArgs& args);                // create (args.config is read here)
//   const sdk::ModelInfo& model_info() const;
//   sdk::BudgetRange budget_range() const;
//   Item item_create(const eg_item_desc& desc);           // copied size-safely
//   sdk::ItemSpec item_spec(const Item& item) const;
//   sdk::Shape buffer_shape(const eg_graph_shape& shape, int32_t buffer) const;
//   void prepare_replay_buffers(const eg_graph_shape&, const sdk::Batch<Item>&, sdk::StagingSet&);
//   void forward(const sdk::ForwardArgs& args);
// Optional members (absent: the default in brackets):
//   sdk::Shape output_shape(const eg_graph_shape&, int32_t output) const
//       [rows_per_item 0: [token_budget, width]; else [max_batch_size * rows_per_item, width]]
//   size_t workspace_size(const eg_graph_shape&) const           [0]
//   void prepare_capture_staging(const eg_graph_shape&, sdk::StagingSet&)
//       [every buffer zero; present: a buffer it leaves reports rows -1, none written]
//   std::vector<int64_t> select_axis_keys(const sdk::Batch<Item>&)  [none; needed with axes]
//   void pad_buffer(int32_t buffer, const eg_tensor& dst, int64_t rows, void* stream)
//   void forward_eager(const sdk::ForwardArgs&)                   [forward]
//   void postprocess_outputs(const sdk::PostprocessArgs<Item>&)   [the runtime's copy]
//   void prepare_device(void* stream)
//   sdk::ItemSpec item_spec_for_desc(const eg_item_desc&) const
//       [the runtime makes a synthetic item and reads its spec] (1.2: the spec
//       item_create would give, its pixels ignored; must equal it and fail
//       where item_create fails on the geometry)
//   static constexpr bool concurrent_items = true;
//       [false] (1.4: item_create, item_spec and the Item's destructor are
//       safe on several threads at once, so the runtime makes a batch's items
//       in parallel; nothing else runs meanwhile)
//
// An SDK plugin is an ABI 1.4 table that needs a 1.1 runtime at least
// (host-staged capture): its entry declines a 1.0 runtime, logging why.
#pragma once

#include <encgraph/sdk/config.hpp>
#include <encgraph/sdk/error.hpp>
#include <encgraph/sdk/host.hpp>
#include <encgraph/sdk/item.hpp>
#include <encgraph/sdk/model_info.hpp>
#include <encgraph/sdk/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace encgraph::sdk {

struct Identity {
  const char* name;         // [A-Za-z0-9_.-]; the file is libencgraph_<name>.so
  const char* version;      // free form
  const char* description;  // one line
  uint32_t modalities;      // bit set of eg_modality
  uint32_t devices;         // bit set of eg_device_type
};

struct BudgetRange {
  int64_t min_budget;
  int64_t max_budget;
};

// What `create` receives, C++-side. The params live during create only.
struct CreateArgs {
  const eg_create_params& raw;
  Config& config;
  int32_t device() const { return raw.device; }
  int32_t device_index() const { return raw.device_index; }
  // The weights setting: a path, "random", or nullopt (the plugin's default).
  std::optional<std::string> weights() const {
    return raw.weights ? std::optional<std::string>(raw.weights) : std::nullopt;
  }
};

// A batch's items in batch order, as the plugin's own type.
template <class Item>
class Batch {
 public:
  Batch(const eg_item* const* items, int64_t count) : items_(items), count_(count) {}
  int64_t size() const { return count_; }
  const Item& operator[](int64_t i) const {
    if (i < 0 || i >= count_) fail(EG_ERR_INTERNAL, "batch: no item " + std::to_string(i));
    return *reinterpret_cast<const Item*>(items_[i]);
  }
  class iterator {
   public:
    iterator(const eg_item* const* p) : p_(p) {}
    const Item& operator*() const { return *reinterpret_cast<const Item*>(*p_); }
    iterator& operator++() {
      ++p_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return p_ != o.p_; }

   private:
    const eg_item* const* p_;
  };
  iterator begin() const { return iterator(items_); }
  iterator end() const { return iterator(items_ + count_); }

 private:
  const eg_item* const* items_;
  int64_t count_;
};

// Everything forward may touch, typed: buffers by declared index, outputs by
// declared index (size-safe: a 1.0-sized eg_forward_args has output 0 only).
class ForwardArgs {
 public:
  ForwardArgs(const eg_forward_args& args, const eg_model_info& info) : a_(args), info_(info) {}
  const eg_graph_shape& shape() const { return a_.shape; }
  int32_t path() const { return a_.shape.path; }
  template <class T>
  TensorView<const T> buffer(int32_t index) const {
    if (index < 0 || index >= a_.num_buffers || !a_.buffers)
      fail(EG_ERR_INTERNAL, "forward: no buffer " + std::to_string(index));
    return TensorView<const T>(a_.buffers[index], std::string("buffer '") + name(index) + "'");
  }
  int32_t num_outputs() const {
    const size_t size = a_.struct_size ? a_.struct_size : EG_FORWARD_ARGS_V1_0_SIZE;
    return EG_HAS_FIELD(size, eg_forward_args, num_outputs) && a_.outputs ? a_.num_outputs : 1;
  }
  template <class T>
  TensorView<T> output(int32_t index = 0) const {
    if (index < 0 || index >= num_outputs())
      fail(EG_ERR_INTERNAL, "forward: no output " + std::to_string(index));
    const eg_tensor& t = index == 0 ? a_.output : a_.outputs[index];
    const char* n = index < info_.num_outputs ? info_.outputs[index].name : "embeddings";
    return TensorView<T>(t, std::string("output '") + n + "'");
  }
  // Output `index`'s memory untyped, for a forward whose dtype is chosen at
  // run time; a runtime that passed no tensor for it is an error, not a skip.
  void* output_data(int32_t index = 0) const {
    if (index < 0 || index >= num_outputs() || index >= info_.num_outputs)
      invalid("forward: the runtime passed no tensor for output " + std::to_string(index) +
              " (fewer outputs than model_info declares)");
    void* data = index == 0 ? a_.output.data : a_.outputs[index].data;
    if (!data && index > 0)
      invalid("forward: the runtime passed no memory for output " + std::to_string(index) + " ('" +
              info_.outputs[index].name + "')");
    return data;
  }
  // Every buffer, in declared order (as many as model_info declares; the SDK
  // checked the count), for kernels that take the raw tensors.
  const eg_tensor* buffers() const { return a_.buffers; }
  void* workspace() const { return a_.workspace; }
  size_t workspace_size() const { return a_.workspace_size; }
  void* stream() const { return a_.stream; }
  const eg_forward_args& raw() const { return a_; }

 private:
  const char* name(int32_t b) const {
    return b < info_.num_buffers && info_.buffers[b].name ? info_.buffers[b].name : "?";
  }
  const eg_forward_args& a_;
  const eg_model_info& info_;
};

// postprocess_outputs' arguments: output o of path p, item i's result of output o.
template <class Item>
class PostprocessArgs {
 public:
  PostprocessArgs(const eg_tensor* outputs, int32_t num_paths, int32_t num_outputs,
                  Batch<Item> items, const eg_tensor* results, void* stream,
                  const eg_model_info& info)
      : outputs_(outputs),
        num_paths_(num_paths),
        num_outputs_(num_outputs),
        items_(items),
        results_(results),
        stream_(stream),
        info_(info) {}
  const Batch<Item>& items() const { return items_; }
  int64_t num_items() const { return items_.size(); }
  int32_t num_paths() const { return num_paths_; }
  int32_t num_outputs() const { return num_outputs_; }
  void* stream() const { return stream_; }
  // Whether the batch sent tokens down path p (else its outputs have no data).
  bool path_used(int32_t p) const {
    return p >= 0 && p < num_paths_ && outputs_[p * num_outputs_].data != nullptr;
  }
  template <class T>
  TensorView<const T> output(int32_t path, int32_t o) const {
    check_output(o);
    if (!path_used(path))
      fail(EG_ERR_INTERNAL, "postprocess: path " + std::to_string(path) + " ran no tokens");
    return TensorView<const T>(
        outputs_[path * num_outputs_ + o],
        std::string("path ") + info_.paths[path].name + " output '" + info_.outputs[o].name + "'");
  }
  template <class T>
  TensorView<T> result(int32_t o, int64_t i) const {
    check_output(o);
    if (i < 0 || i >= items_.size())
      fail(EG_ERR_INTERNAL, "postprocess: no item " + std::to_string(i));
    return TensorView<T>(results_[o * items_.size() + i],
                         "item " + std::to_string(i) + " result '" + info_.outputs[o].name + "'");
  }
  // The same two untyped, for a dtype chosen at run time (f32 on the CPU,
  // bf16 on CUDA): device pointers when the outputs live on the device.
  const void* output_data(int32_t path, int32_t o) const {
    check_output(o);
    if (!path_used(path))
      fail(EG_ERR_INTERNAL, "postprocess: path " + std::to_string(path) + " ran no tokens");
    return outputs_[path * num_outputs_ + o].data;
  }
  void* result_data(int32_t o, int64_t i) const {
    check_output(o);
    if (i < 0 || i >= items_.size())
      fail(EG_ERR_INTERNAL, "postprocess: no item " + std::to_string(i));
    void* data = results_[o * items_.size() + i].data;
    if (!data)
      fail(EG_ERR_INTERNAL, "postprocess: item " + std::to_string(i) + " result '" +
                                info_.outputs[o].name + "' has no memory");
    return data;
  }

 private:
  void check_output(int32_t o) const {
    if (o < 0 || o >= num_outputs_ || o >= info_.num_outputs)
      fail(EG_ERR_INTERNAL, "postprocess: no output " + std::to_string(o));
  }
  const eg_tensor* outputs_;
  int32_t num_paths_;
  int32_t num_outputs_;
  Batch<Item> items_;
  const eg_tensor* results_;
  void* stream_;
  const eg_model_info& info_;
};

namespace detail {

template <class M, class = void>
struct has_output_shape : std::false_type {};
template <class M>
struct has_output_shape<M, std::void_t<decltype(&M::output_shape)>> : std::true_type {};
template <class M, class = void>
struct has_workspace_size : std::false_type {};
template <class M>
struct has_workspace_size<M, std::void_t<decltype(&M::workspace_size)>> : std::true_type {};
template <class M, class = void>
struct has_capture_staging : std::false_type {};
template <class M>
struct has_capture_staging<M, std::void_t<decltype(&M::prepare_capture_staging)>> : std::true_type {
};
template <class M, class = void>
struct has_axis_keys : std::false_type {};
template <class M>
struct has_axis_keys<M, std::void_t<decltype(&M::select_axis_keys)>> : std::true_type {};
template <class M, class = void>
struct has_pad_buffer : std::false_type {};
template <class M>
struct has_pad_buffer<M, std::void_t<decltype(&M::pad_buffer)>> : std::true_type {};
template <class M, class = void>
struct has_forward_eager : std::false_type {};
template <class M>
struct has_forward_eager<M, std::void_t<decltype(&M::forward_eager)>> : std::true_type {};
template <class M, class = void>
struct has_postprocess : std::false_type {};
template <class M>
struct has_postprocess<M, std::void_t<decltype(&M::postprocess_outputs)>> : std::true_type {};
template <class M, class = void>
struct has_prepare_device : std::false_type {};
template <class M>
struct has_prepare_device<M, std::void_t<decltype(&M::prepare_device)>> : std::true_type {};
template <class M, class = void>
struct declares_concurrent_items : std::false_type {};
template <class M>
struct declares_concurrent_items<M, std::void_t<decltype(M::concurrent_items)>>
    : std::bool_constant<M::concurrent_items> {};
template <class M, class = void>
struct has_spec_for_desc : std::false_type {};
template <class M>
struct has_spec_for_desc<M, std::void_t<decltype(&M::item_spec_for_desc)>> : std::true_type {};

// One C function per table slot; each runs the model's member inside guard().
template <class M>
struct Thunks {
  using Item = typename M::Item;
  static M& self(eg_instance* i) { return *reinterpret_cast<M*>(i); }
  static const eg_model_info& info(eg_instance* i) { return self(i).model_info().raw(); }
  static const Item& item(const eg_item* it) { return *reinterpret_cast<const Item*>(it); }
  static void need(const void* p, const char* what) {
    if (!p) fail(EG_ERR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  }
  // The runtime passes every declared buffer to the staging calls and forward;
  // another count would let the model index past them.
  static void need_buffers(eg_instance* i, int32_t n, const char* call) {
    const int32_t declared = info(i).num_buffers;
    if (n != declared)
      invalid(std::string(M::identity.name) + ": " + call + " got " + std::to_string(n) +
              " buffers; model_info declares " + std::to_string(declared));
  }

  static eg_status create(const eg_create_params* params, eg_instance** out, eg_error* err) {
    return guard(err, [&] {
      need(params, "create: params");
      need(out, "create: out");
      Config config(params->config, params->num_config, M::identity.name);
      CreateArgs args{*params, config};
      auto model = std::make_unique<M>(args);
      config.reject_unknown();          // after the constructor has read every key it knows
      (void)model->model_info().raw();  // a bad description fails here, clearly
      *out = reinterpret_cast<eg_instance*>(model.release());
    });
  }
  static void destroy(eg_instance* i) { delete reinterpret_cast<M*>(i); }
  static eg_status model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
    return guard(err, [&] {
      need(out, "model_info: out");
      // A struct smaller than 1.0's is the runtime's bug: refused, not filled in part.
      if (out->struct_size < EG_MODEL_INFO_V1_0_SIZE)
        invalid("model_info: the runtime's eg_model_info struct_size " +
                std::to_string(out->struct_size) + " is below ABI 1.0's " +
                std::to_string(EG_MODEL_INFO_V1_0_SIZE));
      write_model_info(out, info(i));
    });
  }
  static eg_status budget_range(eg_instance* i, int64_t* lo, int64_t* hi, eg_error* err) {
    return guard(err, [&] {
      need(lo, "budget_range: min");
      need(hi, "budget_range: max");
      const BudgetRange r = self(i).budget_range();
      *lo = r.min_budget;
      *hi = r.max_budget;
    });
  }
  static eg_status item_create(eg_instance* i, const eg_item_desc* desc, eg_item** out,
                               eg_error* err) {
    return guard(err, [&] {
      need(desc, "item_create: desc");
      need(out, "item_create: out");
      auto it = std::make_unique<Item>(self(i).item_create(read_item_desc(desc)));
      *out = reinterpret_cast<eg_item*>(it.release());
    });
  }
  static void item_destroy(eg_instance*, eg_item* it) { delete reinterpret_cast<Item*>(it); }
  static eg_status item_spec(eg_instance* i, const eg_item* it, eg_item_spec* out, eg_error* err) {
    return guard(err, [&] {
      need(it, "item_spec: item");
      need(out, "item_spec: out");
      write_item_spec(out, self(i).item_spec(item(it)));
    });
  }
  static eg_status spec_for_desc(eg_instance* i, const eg_item_desc* desc, eg_item_spec* out,
                                 eg_error* err) {
    return guard(err, [&] {
      need(desc, "item_spec_for_desc: desc");
      need(out, "item_spec_for_desc: out");
      write_item_spec(out, self(i).item_spec_for_desc(read_item_desc(desc)));
    });
  }
  static eg_status select_axis_keys(eg_instance* i, const eg_item* const* items, int64_t n,
                                    int64_t* keys, eg_error* err) {
    return guard(err, [&] {
      const std::vector<int64_t> k = self(i).select_axis_keys(Batch<Item>(items, n));
      if (static_cast<int64_t>(k.size()) != info(i).num_capture_axes)
        fail(EG_ERR_INTERNAL, "select_axis_keys returned " + std::to_string(k.size()) +
                                  " keys for " + std::to_string(info(i).num_capture_axes) +
                                  " capture axes");
      for (size_t a = 0; a < k.size(); ++a) keys[a] = k[a];
    });
  }
  static eg_status buffer_shape(eg_instance* i, const eg_graph_shape* shape, int32_t index,
                                eg_tensor* out, eg_error* err) {
    return guard(err, [&] {
      const eg_model_info& mi = info(i);
      if (index < 0 || index >= mi.num_buffers)
        invalid("buffer_shape: no buffer " + std::to_string(index) + " (the plugin declares " +
                std::to_string(mi.num_buffers) + ")");
      self(i).buffer_shape(*shape, index).write(out, mi.buffers[index].dtype, EG_DEVICE_CPU);
    });
  }
  static Shape output_shape_of(eg_instance* i, const eg_graph_shape& shape, int32_t o) {
    const eg_model_info& mi = info(i);
    if (o < 0 || o >= mi.num_outputs)
      invalid("output_shape: no output " + std::to_string(o) + " (the plugin declares " +
              std::to_string(mi.num_outputs) + ")");
    if constexpr (has_output_shape<M>::value) {
      return self(i).output_shape(shape, o);
    } else {
      const eg_output_info& out = mi.outputs[o];
      const int64_t rows =
          out.rows_per_item == 0 ? shape.token_budget : shape.max_batch_size * out.rows_per_item;
      return Shape{rows, out.width};
    }
  }
  static eg_status output_shape(eg_instance* i, const eg_graph_shape* shape, eg_tensor* out,
                                eg_error* err) {
    return guard(err, [&] {
      output_shape_of(i, *shape, 0).write(out, info(i).outputs[0].dtype, EG_DEVICE_CPU);
    });
  }
  static eg_status output_shape_at(eg_instance* i, const eg_graph_shape* shape, int32_t index,
                                   eg_tensor* out, eg_error* err) {
    return guard(err, [&] {
      const Shape s = output_shape_of(i, *shape, index);
      s.write(out, info(i).outputs[index].dtype, EG_DEVICE_CPU);
    });
  }
  static eg_status workspace_size(eg_instance* i, const eg_graph_shape* shape, size_t* bytes,
                                  eg_error* err) {
    return guard(err, [&] {
      if constexpr (has_workspace_size<M>::value)
        *bytes = self(i).workspace_size(*shape);
      else
        *bytes = 0;
      (void)i;
      (void)shape;
    });
  }
  static eg_status capture_staging(eg_instance* i, const eg_graph_shape* shape,
                                   eg_replay_buffer* buffers, int32_t n, eg_error* err) {
    return guard(err, [&] {
      need_buffers(i, n, "prepare_capture_staging");
      StagingSet set(buffers, n, info(i));
      if constexpr (has_capture_staging<M>::value) {
        // What the model leaves is "none written" (the runtime pads it
        // whole), whatever the runtime preset.
        for (int32_t b = 0; b < n; ++b) buffers[b].rows = -1;
        self(i).prepare_capture_staging(*shape, set);
      } else {  // zeros: rows 0 of each buffer, the rest padded (zero or repeat-last)
        for (int32_t b = 0; b < n; ++b) buffers[b].rows = 0;
        (void)shape;
      }
    });
  }
  static eg_status replay_buffers(eg_instance* i, const eg_graph_shape* shape,
                                  const eg_item* const* items, int64_t num_items,
                                  eg_replay_buffer* buffers, int32_t n, eg_error* err) {
    return guard(err, [&] {
      need_buffers(i, n, "prepare_replay_buffers");
      StagingSet set(buffers, n, info(i));
      self(i).prepare_replay_buffers(*shape, Batch<Item>(items, num_items), set);
    });
  }
  static eg_status pad_buffer(eg_instance* i, int32_t index, const eg_tensor* dst, int64_t rows,
                              void* stream, eg_error* err) {
    return guard(err, [&] { self(i).pad_buffer(index, *dst, rows, stream); });
  }
  static eg_status forward(eg_instance* i, const eg_forward_args* args, eg_error* err) {
    return guard(err, [&] {
      need(args, "forward: args");
      need_buffers(i, args->num_buffers, "forward");
      self(i).forward(ForwardArgs(*args, info(i)));
    });
  }
  static eg_status forward_eager(eg_instance* i, const eg_forward_args* args, eg_error* err) {
    return guard(err, [&] {
      need(args, "forward_eager: args");
      need_buffers(i, args->num_buffers, "forward_eager");
      self(i).forward_eager(ForwardArgs(*args, info(i)));
    });
  }
  static eg_status postprocess(eg_instance* i, const eg_tensor* outputs, int32_t num_paths,
                               int32_t num_outputs, const eg_item* const* items, int64_t n,
                               const eg_tensor* results, void* stream, eg_error* err) {
    return guard(err, [&] {
      self(i).postprocess_outputs(PostprocessArgs<Item>(
          outputs, num_paths, num_outputs, Batch<Item>(items, n), results, stream, info(i)));
    });
  }
  static eg_status prepare_device(eg_instance* i, void* stream, eg_error* err) {
    return guard(err, [&] { self(i).prepare_device(stream); });
  }
};

template <class M>
eg_plugin_api make_table() {
  using T = Thunks<M>;
  eg_plugin_api t{};
  t.abi_major = EG_ABI_VERSION_MAJOR;
  t.abi_minor = EG_ABI_VERSION_MINOR;
  t.struct_size = sizeof(eg_plugin_api);
  t.name = M::identity.name;
  t.version = M::identity.version;
  t.description = M::identity.description;
  t.modalities = M::identity.modalities;
  t.devices = M::identity.devices;
  t.create = &T::create;
  t.destroy = &T::destroy;
  t.model_info = &T::model_info;
  t.budget_range = &T::budget_range;
  t.item_create = &T::item_create;
  t.item_destroy = &T::item_destroy;
  t.item_spec = &T::item_spec;
  t.buffer_shape = &T::buffer_shape;
  t.output_shape = &T::output_shape;
  t.workspace_size = &T::workspace_size;
  t.prepare_capture_inputs = nullptr;  // 1.1: prepare_capture_staging replaces it
  t.prepare_replay_buffers = &T::replay_buffers;
  t.forward = &T::forward;
  t.prepare_capture_staging = &T::capture_staging;
  t.output_shape_at = &T::output_shape_at;
  if constexpr (has_axis_keys<M>::value) t.select_axis_keys = &T::select_axis_keys;
  if constexpr (has_pad_buffer<M>::value) t.pad_buffer = &T::pad_buffer;
  if constexpr (has_forward_eager<M>::value) t.forward_eager = &T::forward_eager;
  if constexpr (has_postprocess<M>::value) t.postprocess_outputs = &T::postprocess;
  if constexpr (has_prepare_device<M>::value) t.prepare_device = &T::prepare_device;
  if constexpr (has_spec_for_desc<M>::value) t.item_spec_for_desc = &T::spec_for_desc;
  if constexpr (declares_concurrent_items<M>::value) t.flags |= EG_PLUGIN_CONCURRENT_ITEMS;
  return t;
}

}  // namespace detail

// The plugin's static table (built once, thread-safely).
template <class M>
const eg_plugin_api& plugin_table() {
  static const eg_plugin_api table = detail::make_table<M>();
  return table;
}

// The body of encgraph_plugin_entry: attaches the host, declines a runtime of
// another major or of minor 0 (no host-staged capture), returns the table.
template <class M>
const eg_plugin_api* entry(const eg_host_api* api) noexcept {
  Host& h = host();
  h.attach(api, M::identity.name);
  if (api && api->abi_major != EG_ABI_VERSION_MAJOR) {
    h.error("built for plugin ABI " + std::to_string(EG_ABI_VERSION_MAJOR) +
            ".x but the runtime speaks " + std::to_string(api->abi_major) + "." +
            std::to_string(api->abi_minor) + "; rebuild the plugin against this runtime");
    return nullptr;
  }
  if (api && api->abi_minor < 1) {
    h.error(
        "built on the encgraph SDK, which needs plugin ABI 1.1 (host-staged capture) but "
        "the runtime speaks 1." +
        std::to_string(api->abi_minor) + "; upgrade encgraph");
    return nullptr;
  }
  return &plugin_table<M>();
}

}  // namespace encgraph::sdk

// Exports the one entry symbol for the model class `Model`.
#define ENCGRAPH_SDK_PLUGIN(Model)                                        \
  extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry( \
      const eg_host_api* host) {                                          \
    return ::encgraph::sdk::entry<Model>(host);                           \
  }
