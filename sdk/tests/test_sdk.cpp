// The plugin SDK (<encgraph/sdk/...>) on its own, without a runtime: the
// guard, the config reader, the size-safe copies, the staging views and the
// table a model class turns into.
#include <encgraph/sdk/sdk.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <initializer_list>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sdk = encgraph::sdk;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct Entries {  // a flattened [plugin.config] table (raw points into kv)
  std::vector<std::pair<std::string, std::string>> kv;
  std::vector<eg_config_entry> raw;
  Entries(std::initializer_list<std::pair<std::string, std::string>> pairs) : kv(pairs) {
    for (const auto& [k, v] : kv) raw.push_back({k.c_str(), v.c_str()});
  }
  Entries(const Entries&) = delete;
  Entries& operator=(const Entries&) = delete;
  sdk::Config reader() const {
    return sdk::Config(raw.data(), static_cast<int64_t>(raw.size()), "testplug");
  }
};

std::string failure_of(const std::function<void()>& fn, eg_status* status = nullptr) {
  try {
    fn();
  } catch (const sdk::Failure& f) {
    if (status) *status = f.status();
    return f.what();
  }
  return "";
}

}  // namespace

TEST_CASE("guard maps every exception to a status and a message") {
  eg_error err{};
  CHECK(sdk::guard(&err, [] {}) == EG_OK);
  CHECK(sdk::guard(&err, [] { sdk::fail(EG_ERR_IO, "cannot read w.bin"); }) == EG_ERR_IO);
  CHECK(std::string(err.message) == "cannot read w.bin");
  CHECK(sdk::guard(&err, [] { throw std::bad_alloc(); }) == EG_ERR_OUT_OF_MEMORY);
  CHECK(contains(err.message, "out of host memory"));
  CHECK(sdk::guard(&err, [] { throw std::runtime_error("boom"); }) == EG_ERR_INTERNAL);
  CHECK(std::string(err.message) == "boom");
  CHECK(sdk::guard(&err, [] { throw 42; }) == EG_ERR_INTERNAL);
  CHECK(contains(err.message, "unknown exception"));
  // A Failure cannot claim success. (A status outside the enum cannot be made
  // without undefined behaviour in C++, so it is not tested here.)
  CHECK(sdk::guard(&err, [] { sdk::fail(EG_OK, "x"); }) == EG_ERR_INTERNAL);
  CHECK(sdk::guard(nullptr, [] { sdk::invalid("no err"); }) == EG_ERR_INVALID_ARGUMENT);
}

TEST_CASE("write_error truncates at a character boundary and terminates") {
  eg_error err;
  std::memset(err.message, 'Z', sizeof(err.message));
  std::string m(sizeof(err.message) - 2, 'a');
  m += "\xC3\xA9\xC3\xA9";  // "éé": the cut falls inside the first one
  sdk::write_error(&err, m.c_str());
  const std::string got = err.message;
  CHECK(got.size() == sizeof(err.message) - 2);
  CHECK(got == std::string(sizeof(err.message) - 2, 'a'));
  sdk::write_error(&err, nullptr);
  CHECK(err.message[0] == '\0');
}

TEST_CASE("config: typed values, defaults, bounds and lists") {
  const Entries e{{"scale", "2.5"}, {"layers", "[1, 7, 15]"}, {"name", "tower"},  {"on", "true"},
                  {"n", "12"},      {"empty", "[]"},          {"words", "[a, b]"}};
  sdk::Config c = e.reader();
  CHECK(c.get<double>("scale", 1.0) == doctest::Approx(2.5));
  CHECK(c.get<float>("missing", 0.25f) == doctest::Approx(0.25f));
  CHECK(c.get<std::vector<int64_t>>("layers", {}, {0, 31}) == std::vector<int64_t>{1, 7, 15});
  CHECK(c.get<std::string>("name", "") == "tower");
  CHECK(c.get<bool>("on", false));
  CHECK(c.get<int32_t>("n", 0, {1, 16}) == 12);
  CHECK(c.get<std::vector<int64_t>>("empty", {9}).empty());
  CHECK(c.get<std::vector<std::string>>("words", {}) == std::vector<std::string>{"a", "b"});
  CHECK(c.get_optional<int64_t>("n", {1, 16}) == std::optional<int64_t>(12));
  CHECK_FALSE(c.get_optional<std::string>("absent").has_value());
  CHECK_NOTHROW(c.reject_unknown());  // get_optional made "absent" known

  const Entries q{{"names", "[\"a\", 'b', c]"},
                  {"holes", "[a, , b]"},
                  {"tail", "[1, 2,]"},
                  {"seed", "18446744073709551615"},
                  {"neg", "-1"}};
  sdk::Config c2 = q.reader();
  CHECK(c2.get<std::vector<std::string>>("names", {}) == std::vector<std::string>{"a", "b", "c"});
  CHECK(contains(failure_of([&] { c2.get<std::vector<std::string>>("holes", {}); }),
                 "holes = '[a, , b]' has an empty element"));
  CHECK(contains(failure_of([&] { c2.get<std::vector<int64_t>>("tail", {}); }),
                 "has an empty element"));
  CHECK(c2.get<uint64_t>("seed", 0) == UINT64_MAX);
  CHECK(contains(failure_of([&] { c2.get<uint64_t>("neg", 0); }), "not a non-negative integer"));
}

TEST_CASE("config: bad values name the key, the value and the fix") {
  const Entries e{{"n", "2.5"}, {"big", "99"}, {"flag", "yes"}, {"x", "nan"}, {"l", "[1, 40]"}};
  sdk::Config c = e.reader();
  eg_status st = EG_OK;
  CHECK(contains(failure_of([&] { c.get<int64_t>("n", 0); }, &st),
                 "testplug: [plugin.config] n = '2.5' is not an integer"));
  CHECK(st == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(failure_of([&] {
                   c.get<int64_t>("big", 0, {1, 64});
                 }),
                 "big = 99 is outside [1, 64]"));
  CHECK(contains(failure_of([&] { c.get<bool>("flag", false); }), "use true or false"));
  CHECK(contains(failure_of([&] { c.get<double>("x", 0.0); }), "not a finite number"));
  CHECK(contains(failure_of([&] {
                   c.get<std::vector<int64_t>>("l", {}, {0, 31});
                 }),
                 "l = 40 is outside [0, 31]"));
  CHECK(contains(failure_of([&] { c.require<int64_t>("hidden"); }), "needs the key 'hidden'"));
  CHECK(contains(failure_of([&] {
                   c.get_choice("mode", "slow", {"fast", "exact"});
                 }),
                 "mode = 'slow' is not one of fast, exact"));
}

TEST_CASE("config: unknown keys are refused with the nearest known key and the list") {
  const Entries e{{"scael", "2"}};
  sdk::Config c = e.reader();
  c.get<double>("scale", 1.0);
  c.get<int64_t>("tile", 16);
  const std::string m = failure_of([&] { c.reject_unknown(); });
  CHECK(contains(m, "testplug: unknown config key 'scael' in [plugin.config]"));
  CHECK(contains(m, "(did you mean 'scale'?)"));
  CHECK(contains(m, "known keys: scale, tile"));

  const Entries far{{"colour", "red"}};
  sdk::Config c2 = far.reader();
  c2.get<double>("scale", 1.0);
  const std::string m2 = failure_of([&] { c2.reject_unknown(); });
  CHECK(contains(m2, "unknown config key 'colour'"));
  CHECK_FALSE(contains(m2, "did you mean"));

  const Entries dup{{"a", "1"}, {"a", "2"}};
  CHECK(contains(failure_of([&] { (void)dup.reader(); }), "a is given twice"));
  CHECK(sdk::nearest_key("TILE", {"tile", "scale"}) == std::optional<std::string>("tile"));
}

TEST_CASE("write_model_info copies up to the runtime's struct_size, never the size itself") {
  sdk::ModelInfo info;
  info.path("default", "patches")
      .buffer("x", EG_DTYPE_F32)
      .output("main", 4, EG_DTYPE_F32)
      .output("pooled", 3, EG_DTYPE_F32, 1);
  const eg_model_info& raw = info.raw();
  CHECK(raw.out_hidden_size == 4);
  CHECK(raw.num_outputs == 2);
  CHECK(std::string(raw.path_units[0]) == "patches");

  // A 1.0 runtime's struct: 488 bytes, then bytes it owns (poisoned here).
  std::vector<unsigned char> mem(sizeof(eg_model_info) + 64, 0xAB);
  auto* out = reinterpret_cast<eg_model_info*>(mem.data());
  out->struct_size = EG_MODEL_INFO_V1_0_SIZE;
  sdk::write_model_info(out, raw);
  CHECK(out->struct_size == EG_MODEL_INFO_V1_0_SIZE);
  CHECK(out->out_hidden_size == 4);
  CHECK(out->num_paths == 1);
  for (size_t b = EG_MODEL_INFO_V1_0_SIZE; b < mem.size(); ++b) REQUIRE(mem[b] == 0xAB);

  // A runtime that claims more than this header knows: the rest stays its own.
  out->struct_size = sizeof(eg_model_info) + 64;
  sdk::write_model_info(out, raw);
  CHECK(out->struct_size == sizeof(eg_model_info) + 64);
  CHECK(out->num_outputs == 2);
  for (size_t b = sizeof(eg_model_info); b < mem.size(); ++b) REQUIRE(mem[b] == 0xAB);

  sdk::ModelInfo bad;
  CHECK(contains(failure_of([&] { (void)bad.raw(); }), "at least one path"));
  CHECK(contains(failure_of([&] { bad.output("p", 2, EG_DTYPE_F32, 1); }), "rows_per_item 0"));
}

TEST_CASE("item spec and desc are copied within the host's sizes") {
  std::vector<unsigned char> mem(sizeof(eg_item_spec) + 16, 0xCD);
  auto* spec = reinterpret_cast<eg_item_spec*>(mem.data());
  sdk::write_item_spec(spec, {5, 7, 1, {3, 4}}, 24);  // a runtime knowing 3 fields only
  CHECK(spec->input_size == 5);
  CHECK(spec->output_tokens == 7);
  CHECK(spec->frames == 1);
  for (size_t b = 24; b < mem.size(); ++b) REQUIRE(mem[b] == 0xCD);
  sdk::write_item_spec(spec, {5, 7, 1, {3, 4}}, sizeof(eg_item_spec));
  CHECK(spec->path_tokens[1] == 4);
  CHECK(spec->path_tokens[2] == 0);

  eg_item_desc d{};
  d.height = 9;
  d.seed = 77;
  const eg_item_desc copy = sdk::read_item_desc(&d, offsetof(eg_item_desc, pixels));
  CHECK(copy.height == 9);
  CHECK(copy.seed == 0);  // past the host's size: not read
  CHECK(sdk::read_item_desc(&d, sizeof(eg_item_desc)).seed == 77);
}

TEST_CASE("staging views: typed rows, bounds, set_rows, append and push") {
  std::vector<float> mem(4 * 3, -1.0f);
  eg_replay_buffer b{};
  b.staging.data = mem.data();
  b.staging.dtype = EG_DTYPE_F32;
  b.staging.ndim = 2;
  b.staging.shape[0] = 4;
  b.staging.shape[1] = 3;
  b.rows = -1;
  sdk::Staging<float> s(b, "patches");
  CHECK(s.rows() == 4);
  CHECK(s.width() == 3);
  const float row[6] = {1, 2, 3, 4, 5, 6};
  s.append(row, 2);
  CHECK(b.rows == 2);
  CHECK(mem[5] == 6.0f);
  eg_status st = EG_OK;
  CHECK(contains(failure_of([&] { s.append(row, 3); }, &st),
                 "buffer 'patches' (staging) holds 4 rows; rows [2, 5) do not fit"));
  CHECK(st == EG_ERR_INVALID_ARGUMENT);
  CHECK(b.rows == 2);  // a refused append writes nothing
  CHECK(contains(failure_of([&] { s.push(1.0f); }), "push() writes one"));
  CHECK(contains(failure_of([&] { s.set_rows(5); }), "do not fit"));
  s.set_rows(0);
  CHECK(b.rows == 0);
  CHECK(contains(failure_of([&] { (void)s.at(1, 3); }), "column 3"));
  CHECK(contains(failure_of([&] { sdk::Staging<int32_t> wrong(b, "patches"); }, &st),
                 "holds f32 elements"));
  CHECK(st == EG_ERR_INTERNAL);

  std::vector<int32_t> cu(3, 0);
  eg_replay_buffer c{};
  c.staging = eg_tensor{cu.data(), EG_DTYPE_I32, EG_DEVICE_CPU, 1, 0, {3}};
  c.rows = -1;
  eg_model_info info{};
  info.num_buffers = 1;
  info.buffers[0] = {"cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
  sdk::StagingSet set(&c, 1, info);
  sdk::Staging<int32_t> offsets = set.get<int32_t>(0);
  offsets.push(0);
  offsets.push(4);
  CHECK(c.rows == 2);
  CHECK(cu[1] == 4);
  CHECK(contains(failure_of([&] { (void)set.get<int32_t>(1); }), "no buffer 1"));
  set.leave(0);
  CHECK(c.rows == -1);
}

TEST_CASE("untyped staging: a dtype chosen at run time, rows bounded") {
  std::vector<uint16_t> mem(4 * 6, 0);
  eg_replay_buffer b{};
  b.staging = eg_tensor{mem.data(), EG_DTYPE_BF16, EG_DEVICE_CPU, 2, 0, {4, 6}};
  b.rows = -1;
  eg_model_info info{};
  info.num_buffers = 1;
  info.buffers[0] = {"pixel_rows", EG_DTYPE_BF16, EG_PAD_ZERO};
  sdk::StagingSet set(&b, 1, info);
  sdk::UntypedStaging u = set.untyped(0);
  CHECK(u.data() == mem.data());
  CHECK(u.dtype() == EG_DTYPE_BF16);
  CHECK(u.rows() == 4);
  CHECK(u.width() == 6);
  u.set_rows(3);
  CHECK(b.rows == 3);
  eg_status st = EG_OK;
  CHECK(contains(failure_of([&] { u.set_rows(5); }, &st),
                 "buffer 'pixel_rows' (staging) holds 4 rows; rows [0, 5) do not fit"));
  CHECK(st == EG_ERR_INVALID_ARGUMENT);
  CHECK(b.rows == 3);
}

TEST_CASE("postprocess args: paths used, typed and untyped outputs and results") {
  eg_model_info info{};
  info.num_paths = 2;
  info.paths[0].name = "global";
  info.paths[1].name = "local";
  info.num_outputs = 1;
  info.outputs[0] = {"features", 2, EG_DTYPE_F32, 0, 0};
  float g[4] = {1, 2, 3, 4}, r0[2] = {}, r1[2] = {};
  const eg_tensor outputs[2] = {{g, EG_DTYPE_F32, EG_DEVICE_CPU, 2, 0, {2, 2}},
                                {}};  // the local path ran no tokens
  const eg_tensor results[2] = {{r0, EG_DTYPE_F32, EG_DEVICE_CPU, 2, 0, {1, 2}},
                                {r1, EG_DTYPE_F32, EG_DEVICE_CPU, 2, 0, {1, 2}}};
  struct Item {
    int v;
  };
  const Item a{1}, b{2};
  const eg_item* items[2] = {reinterpret_cast<const eg_item*>(&a),
                             reinterpret_cast<const eg_item*>(&b)};
  const sdk::PostprocessArgs<Item> args(outputs, 2, 1, sdk::Batch<Item>(items, 2), results, nullptr,
                                        info);
  CHECK(args.path_used(0));
  CHECK_FALSE(args.path_used(1));
  CHECK(args.items()[1].v == 2);
  CHECK(args.output<float>(0, 0).at(1, 1) == 4.0f);
  CHECK(args.output_data(0, 0) == g);
  CHECK(contains(failure_of([&] { (void)args.output_data(1, 0); }), "path 1 ran no tokens"));
  CHECK(args.result_data(0, 1) == r1);
  CHECK(contains(failure_of([&] { (void)args.result_data(0, 2); }), "no item 2"));
  CHECK(contains(failure_of([&] { (void)args.result_data(1, 0); }), "no output 1"));
}

TEST_CASE("forward args: untyped outputs, size-safe and never NULL past the primary") {
  eg_model_info info{};
  info.num_outputs = 2;
  info.outputs[0] = {"last_hidden_state", 4, EG_DTYPE_BF16, 0, 0};
  info.outputs[1] = {"pooled", 4, EG_DTYPE_BF16, 0, 1};
  uint16_t a[4] = {}, b[4] = {};
  eg_tensor outs[2] = {{a, EG_DTYPE_BF16, EG_DEVICE_CPU, 2, 0, {1, 4}},
                       {b, EG_DTYPE_BF16, EG_DEVICE_CPU, 2, 0, {1, 4}}};
  eg_forward_args fa{};
  fa.struct_size = sizeof(fa);
  fa.output = outs[0];
  fa.outputs = outs;
  fa.num_outputs = 2;
  const sdk::ForwardArgs args(fa, info);
  CHECK(args.output_data(0) == a);
  CHECK(args.output_data(1) == b);
  CHECK(contains(failure_of([&] { (void)args.output_data(2); }),
                 "no tensor for output 2 (fewer outputs than model_info declares)"));
  outs[1].data = nullptr;
  CHECK(contains(failure_of([&] { (void)args.output_data(1); }), "no memory for output 1"));
  eg_forward_args v10{};  // a 1.0 runtime's args: the primary output only
  v10.output = outs[0];
  const sdk::ForwardArgs old(v10, info);
  CHECK(old.output_data(0) == a);
  CHECK(contains(failure_of([&] { (void)old.output_data(1); }), "no tensor for output 1"));
}

namespace {

// A model class as a plugin writes it (no ENCGRAPH_SDK_PLUGIN: the test calls entry<>).
struct Tiny {
  static constexpr sdk::Identity identity{"tiny", "0.1", "test model", EG_MODALITY_IMAGE,
                                          EG_DEVICE_CPU};
  struct Item {
    int64_t tokens;
  };
  explicit Tiny(sdk::CreateArgs& args) {
    width = args.config.get<int64_t>("width", 2, {1, 8});
    if (args.config.get<bool>("oom", false)) throw std::bad_alloc();
    info.path("default", "rows").buffer("x", EG_DTYPE_F32).output("y", width, EG_DTYPE_F32);
  }
  const sdk::ModelInfo& model_info() const { return info; }
  sdk::BudgetRange budget_range() const { return {4, 64}; }
  Item item_create(const eg_item_desc& d) const {
    if (d.height <= 0) sdk::invalid("height must be positive");
    return {d.height};
  }
  sdk::ItemSpec item_spec(const Item& it) const { return {it.tokens, it.tokens, 1, {it.tokens}}; }
  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t) const { return {s.token_budget, 1}; }
  void prepare_replay_buffers(const eg_graph_shape&, const sdk::Batch<Item>&, sdk::StagingSet&) {}
  void forward(const sdk::ForwardArgs& args) {
    forwards_seen_outputs = args.num_outputs();
    throw std::runtime_error("forward failed on purpose");
  }
  int64_t width = 2;
  int32_t forwards_seen_outputs = -1;
  sdk::ModelInfo info;
};

// Tiny with the 1.2 entry: the spec from the description, the same geometry rule.
struct TinyForDesc : Tiny {
  static constexpr sdk::Identity identity{"tiny_for_desc", "0.1", "test model", EG_MODALITY_IMAGE,
                                          EG_DEVICE_CPU};
  using Tiny::Tiny;
  // 1.4: its items may be made on several threads.
  static constexpr bool concurrent_items = true;
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const {
    return item_spec(item_create(d));
  }
  // Writes nothing: every buffer must then report rows -1.
  void prepare_capture_staging(const eg_graph_shape&, sdk::StagingSet&) {}
};

void no_log(void*, int32_t, const char*, const char*) {}

}  // namespace

TEST_CASE("the table builder: identity, functions, guards and the 1.0-runtime refusal") {
  eg_host_api host{};
  host.abi_major = 1;
  host.abi_minor = 0;
  host.struct_size = EG_HOST_API_V1_0_SIZE;
  host.log = no_log;
  CHECK(sdk::entry<Tiny>(&host) == nullptr);  // needs host-staged capture (1.1)
  host.abi_major = 2;
  host.abi_minor = 1;
  CHECK(sdk::entry<Tiny>(&host) == nullptr);
  host.abi_major = 1;
  host.struct_size = sizeof(eg_host_api);
  host.item_desc_size = sizeof(eg_item_desc);
  host.item_spec_size = sizeof(eg_item_spec);
  const eg_plugin_api* api = sdk::entry<Tiny>(&host);
  REQUIRE(api != nullptr);
  CHECK(api == sdk::entry<Tiny>(&host));  // one static table
  CHECK(api->abi_major == EG_ABI_VERSION_MAJOR);
  CHECK(api->abi_minor == EG_ABI_VERSION_MINOR);
  CHECK(api->struct_size == EG_PLUGIN_API_V1_4_SIZE);
  CHECK(api->flags == 0);  // no concurrent_items: one item at a time
  CHECK((sdk::plugin_table<TinyForDesc>().flags & EG_PLUGIN_CONCURRENT_ITEMS) != 0);
  CHECK(std::string(api->name) == "tiny");
  CHECK((api->item_spec_for_desc == nullptr));  // Tiny has none: the runtime's synthetic item
  CHECK((api->prepare_capture_staging != nullptr));
  CHECK((api->prepare_capture_inputs == nullptr));
  CHECK((api->postprocess_outputs == nullptr));  // Tiny has none: the runtime copies
  CHECK((api->forward_eager == nullptr));

  Entries bad{{"widht", "3"}};
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  p.config = bad.raw.data();
  p.num_config = 1;
  eg_instance* inst = nullptr;
  eg_error err{};
  CHECK(api->create(&p, &inst, &err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(err.message,
                 "unknown config key 'widht' in [plugin.config] (did you mean 'width'?)"));
  CHECK(inst == nullptr);
  Entries oom{{"oom", "true"}};
  p.config = oom.raw.data();
  CHECK(api->create(&p, &inst, &err) == EG_ERR_OUT_OF_MEMORY);

  Entries good{{"width", "3"}};
  p.config = good.raw.data();
  REQUIRE(api->create(&p, &inst, &err) == EG_OK);
  REQUIRE(inst != nullptr);
  eg_model_info info{};
  info.struct_size = EG_MODEL_INFO_V1_0_SIZE;
  REQUIRE(api->model_info(inst, &info, &err) == EG_OK);
  CHECK(info.out_hidden_size == 3);
  CHECK(info.num_outputs == 0);  // past a 1.0-sized struct: untouched
  eg_model_info small{};
  small.struct_size = 16;  // below 1.0's: refused, not filled in part
  CHECK(api->model_info(inst, &small, &err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(err.message, "struct_size 16 is below ABI 1.0's"));
  CHECK(small.num_paths == 0);

  eg_graph_shape shape{};
  shape.token_budget = 16;
  shape.max_batch_size = 4;
  eg_tensor t{};
  CHECK(api->output_shape(inst, &shape, &t, &err) == EG_OK);
  CHECK((t.ndim == 2 && t.shape[0] == 16 && t.shape[1] == 3));
  CHECK(api->buffer_shape(inst, &shape, 5, &t, &err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(err.message, "no buffer 5"));
  size_t ws = 1;
  CHECK(api->workspace_size(inst, &shape, &ws, &err) == EG_OK);
  CHECK(ws == 0);

  eg_item_desc d{};
  d.height = 0;
  eg_item* item = nullptr;
  CHECK(api->item_create(inst, &d, &item, &err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(std::string(err.message) == "height must be positive");
  d.height = 5;
  REQUIRE(api->item_create(inst, &d, &item, &err) == EG_OK);
  eg_item_spec spec{};
  CHECK(api->item_spec(inst, item, &spec, &err) == EG_OK);
  CHECK(spec.path_tokens[0] == 5);

  // Another buffer count than model_info declares is refused before the model runs.
  eg_forward_args fa{};
  fa.shape = shape;
  CHECK(api->forward(inst, &fa, &err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(err.message, "tiny: forward got 0 buffers; model_info declares 1"));
  CHECK(reinterpret_cast<Tiny*>(inst)->forwards_seen_outputs == -1);
  eg_replay_buffer none{};
  CHECK(api->prepare_replay_buffers(inst, &shape, nullptr, 0, &none, 2, &err) ==
        EG_ERR_INVALID_ARGUMENT);
  none.rows = 7;  // without the model's own capture staging: zeros, rows 0
  CHECK(api->prepare_capture_staging(inst, &shape, &none, 1, &err) == EG_OK);
  CHECK(none.rows == 0);
  CHECK(contains(err.message, "prepare_replay_buffers got 2 buffers"));

  // A 1.0-sized eg_forward_args (struct_size 0) has the primary output only.
  float x = 0.0f;
  eg_tensor xb{&x, EG_DTYPE_F32, EG_DEVICE_CPU, 1, 0, {1}};
  fa.buffers = &xb;
  fa.num_buffers = 1;
  CHECK(api->forward(inst, &fa, &err) == EG_ERR_INTERNAL);
  CHECK(std::string(err.message) == "forward failed on purpose");
  CHECK(reinterpret_cast<Tiny*>(inst)->forwards_seen_outputs == 1);

  api->item_destroy(inst, item);
  api->destroy(inst);
}

TEST_CASE("the table builder: item_spec_for_desc and capture staging when the model has them") {
  eg_host_api host{};
  host.abi_major = 1;
  host.abi_minor = EG_ABI_VERSION_MINOR;
  host.struct_size = sizeof(eg_host_api);
  host.log = no_log;
  host.item_desc_size = sizeof(eg_item_desc);
  host.item_spec_size = sizeof(eg_item_spec);
  const eg_plugin_api* api = sdk::entry<TinyForDesc>(&host);
  REQUIRE(api != nullptr);
  REQUIRE((api->item_spec_for_desc != nullptr));
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  eg_instance* inst = nullptr;
  eg_error err{};
  REQUIRE(api->create(&p, &inst, &err) == EG_OK);
  eg_item_desc d{};
  d.height = 7;
  eg_item_spec spec{};
  CHECK(api->item_spec_for_desc(inst, &d, &spec, &err) == EG_OK);
  CHECK(spec.input_size == 7);
  CHECK(spec.path_tokens[0] == 7);
  d.height = -1;  // refused as item_create refuses it
  CHECK(api->item_spec_for_desc(inst, &d, &spec, &err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(std::string(err.message) == "height must be positive");
  CHECK(api->item_spec_for_desc(inst, nullptr, &spec, &err) == EG_ERR_INVALID_ARGUMENT);
  // Its capture staging leaves the buffer: rows -1 whatever the runtime preset.
  eg_graph_shape shape{};
  shape.token_budget = 4;
  eg_replay_buffer b{};
  b.rows = 3;
  CHECK(api->prepare_capture_staging(inst, &shape, &b, 1, &err) == EG_OK);
  CHECK(b.rows == -1);
  api->destroy(inst);
}
