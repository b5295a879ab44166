// Result: one allocation holding each named output's region (256-aligned),
// item views, host copies and offsets, conversion to float, lookup by name.
#include "device_backend.hpp"
#include "forwarding_backend.hpp"

#include <encgraph/error.hpp>
#include <encgraph/result.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace encgraph;

namespace {

using Rows = std::vector<std::vector<int64_t>>;

// Two items; output "main" (3 f32 columns, the items' own rows, item 1 first
// in memory) and output "pooled" (2 f16 columns, one row each).
Result two_outputs() {
  std::vector<OutputSpec> outputs = {{"main", 3, EG_DTYPE_F32, 0}, {"pooled", 2, EG_DTYPE_F16, 1}};
  const Rows rows = {{2, 3}, {1, 1}};
  const Rows offsets = {{3, 0}, {0, 1}};
  return Result(make_cpu_backend(), outputs, rows, offsets);
}

uintptr_t address(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

// The CPU backend acting as a device that runs apart from the host: copies to
// the host land only when the stream is synchronised (copy_to_host) or the
// copies out are finished (copy_to_host_after); the test counts each wait.
class DeferredCopies final : public test::ForwardingCpuBackend {
 public:
  struct Mark final : StreamMark {
    int* waits;
    explicit Mark(int* w) : waits(w) {}
    void wait() override { ++*waits; }
  };
  int synchronizes = 0, mark_waits = 0, finishes = 0;
  const StreamMark* last_mark = nullptr;  // the mark the last copy out waited on

  void copy_to_host(void* d, const void* s, size_t b) override { on_stream_.push_back({d, s, b}); }
  void synchronize() override {
    ++synchronizes;
    run(on_stream_);
  }
  std::shared_ptr<StreamMark> mark_stream() override { return std::make_shared<Mark>(&mark_waits); }
  void copy_to_host_after(const StreamMark& mark, void* d, const void* s, size_t b) override {
    last_mark = &mark;
    out_.push_back({d, s, b});
  }
  void finish_copies_out() override {
    ++finishes;
    run(out_);
  }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  static void run(std::vector<Copy>& copies) {
    for (const Copy& c : copies) std::memcpy(c.dst, c.src, c.bytes);
    copies.clear();
  }
  std::vector<Copy> on_stream_, out_;
};

}  // namespace

TEST_CASE("each output's region is 256-aligned, sized by its rows, and regions do not overlap") {
  const Result r = two_outputs();
  CHECK(r.size() == 2);
  REQUIRE(r.num_outputs() == 2);
  CHECK(r.total_rows(0) == 5);
  CHECK(r.total_rows(1) == 2);
  CHECK(address(r.output_data(0)) % 256 == 0);
  CHECK(address(r.output_data(1)) % 256 == 0);
  // "main" holds 5 rows x 3 f32 = 60 bytes, then "pooled" starts on the next boundary.
  CHECK(address(r.output_data(1)) >= address(r.output_data(0)) + 60);
  CHECK(r.hidden_size(1) == 2);
  CHECK(r.dtype(1) == EG_DTYPE_F16);
  CHECK(r.device() == EG_DEVICE_CPU);
  CHECK(r.output(1).rows_per_item == 1);
}

TEST_CASE("item(i, o) views item i's rows of output o at its offset") {
  const Result r = two_outputs();
  const eg_tensor a = r.item(0, 0);
  CHECK(a.ndim == 2);
  CHECK(a.shape[0] == 2);
  CHECK(a.shape[1] == 3);
  CHECK(a.dtype == EG_DTYPE_F32);
  CHECK(address(a.data) == address(r.output_data(0)) + 3 * 3 * 4);
  CHECK(address(r.item(1).data) == address(r.output_data(0)));
  const eg_tensor p = r.item(1, 1);
  CHECK(p.shape[0] == 1);
  CHECK(p.shape[1] == 2);
  CHECK(address(p.data) == address(r.output_data(1)) + 1 * 2 * 2);
  CHECK(r.rows(1, 0) == 3);
  CHECK(r.row_offset(0, 0) == 3);
  CHECK_THROWS(r.item(2, 0));
  CHECK_THROWS(r.item(0, 2));
}

TEST_CASE("to_host(o) copies output o; host_offset(i, o) finds item i in it") {
  const Result r = two_outputs();
  // Write known values straight into the (CPU) regions.
  float* main = static_cast<float*>(r.output_data(0));
  for (int k = 0; k < 15; ++k) main[k] = static_cast<float>(k);
  const uint16_t halves[4] = {0x3c00, 0x4000, 0xc000, 0x3800};  // 1, 2, -2, 0.5 in f16
  std::memcpy(r.output_data(1), halves, sizeof(halves));
  const std::vector<uint8_t> host0 = r.to_host(0);
  CHECK(host0.size() == 15 * 4);
  CHECK(r.host_offset(0, 0) == 3 * 3 * 4);
  float first;
  std::memcpy(&first, host0.data() + r.host_offset(0, 0), 4);
  CHECK(first == doctest::Approx(9.0f));
  const std::vector<uint8_t> host1 = r.to_host(1);
  CHECK(host1.size() == 2 * 2 * 2);
  CHECK(r.host_offset(1, 1) == 4);
  // item_as_float converts f16.
  CHECK(r.item_as_float(0, 1) == std::vector<float>{1.0f, 2.0f});
  CHECK(r.item_as_float(1, 1) == std::vector<float>{-2.0f, 0.5f});
  CHECK(r.item_as_float(1, 0) == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("copy_item_to_host(i, o) copies exactly item i's rows of output o") {
  const Result r = two_outputs();
  float* main = static_cast<float*>(r.output_data(0));
  for (int k = 0; k < 15; ++k) main[k] = static_cast<float>(k);
  std::vector<float> item0(2 * 3 + 1, -1.0f), item1(3 * 3 + 1, -1.0f);  // one guard value each
  r.copy_item_to_host(0, 0, item0.data());
  r.copy_item_to_host(1, 0, item1.data());
  r.wait();
  CHECK(std::vector<float>(item0.begin(), item0.end() - 1) ==
        std::vector<float>{9, 10, 11, 12, 13, 14});
  CHECK(std::vector<float>(item1.begin(), item1.end() - 1) ==
        std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(item0.back() == -1.0f);  // nothing past the item's rows
  CHECK(item1.back() == -1.0f);
  uint16_t pooled[3] = {0, 0, 0x7777};
  const uint16_t halves[2] = {0x3c00, 0x4000};
  std::memcpy(static_cast<char*>(r.output_data(1)), halves, sizeof(halves));
  r.copy_item_to_host(0, 1, pooled);
  r.wait();
  CHECK(pooled[0] == 0x3c00);
  CHECK(pooled[1] == 0x4000);
  CHECK(pooled[2] == 0x7777);
}

TEST_CASE("a marked call's copies wait for its mark alone; an unmarked one's for the stream") {
  for (const bool marked : {false, true}) {
    CAPTURE(marked);
    auto backend = std::make_shared<DeferredCopies>();
    std::vector<OutputSpec> outputs = {{"main", 2, EG_DTYPE_F32, 0}};
    Result r(backend, outputs, Rows{{1, 2}}, Rows{{2, 0}});
    float* rows = static_cast<float*>(r.output_data(0));
    for (int k = 0; k < 6; ++k) rows[k] = static_cast<float>(k + 1);
    if (marked) r.mark_written();
    std::vector<float> item0(2, -1.0f), item1(4, -1.0f);
    r.copy_item_to_host(0, 0, item0.data());
    r.copy_item_to_host(1, 0, item1.data());
    CHECK(item0 == std::vector<float>{-1, -1});  // queued, not landed
    r.wait();
    CHECK(item0 == std::vector<float>{5, 6});
    CHECK(item1 == std::vector<float>{1, 2, 3, 4});
    CHECK(backend->synchronizes == (marked ? 0 : 1));
    CHECK(backend->mark_waits == (marked ? 1 : 0));
    CHECK(backend->finishes == (marked ? 1 : 0));
    CHECK((backend->last_mark != nullptr) == marked);
    // Whole outputs and float reads take the same way.
    CHECK(r.to_host(0).size() == 6 * sizeof(float));
    CHECK(r.item_as_float(1, 0) == std::vector<float>{1, 2, 3, 4});
    CHECK(backend->synchronizes == (marked ? 0 : 3));
    CHECK(backend->finishes == (marked ? 3 : 0));
  }
}

TEST_CASE("bf16 and integer outputs convert to float") {
  std::vector<OutputSpec> outputs = {{"a", 2, EG_DTYPE_BF16, 0}, {"ids", 2, EG_DTYPE_I32, 0}};
  const Result r(make_cpu_backend(), outputs, Rows{{1}, {1}}, Rows{{0}, {0}});
  const uint16_t bf[2] = {0x3f80, 0xc040};  // 1, -3
  std::memcpy(r.output_data(0), bf, sizeof(bf));
  const int32_t ids[2] = {7, -1};
  std::memcpy(r.output_data(1), ids, sizeof(ids));
  CHECK(r.item_as_float(0, 0) == std::vector<float>{1.0f, -3.0f});
  CHECK(r.item_as_float(0, 1) == std::vector<float>{7.0f, -1.0f});
}

TEST_CASE("find_output names outputs; the first is the default") {
  const Result r = two_outputs();
  CHECK(r.find_output("main") == 0u);
  CHECK(r.find_output("pooled") == 1u);
  CHECK_FALSE(r.find_output("embeddings").has_value());
  CHECK(r.outputs().size() == 2);
}

TEST_CASE("an empty call still has its outputs, with no rows") {
  const Result r(make_cpu_backend(), {{"embeddings", 4, EG_DTYPE_F32, 0}}, Rows{{}}, Rows{{}});
  CHECK(r.size() == 0);
  CHECK(r.total_rows() == 0);
  CHECK(r.to_host().empty());
  const Result none;
  CHECK(none.size() == 0);
  CHECK(none.num_outputs() == 0);
}

TEST_CASE("a layout that does not fit its outputs is an internal error") {
  auto kind_of = [](auto&& make) {
    try {
      make();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Config;  // nothing thrown
  };
  const std::vector<OutputSpec> one = {{"e", 4, EG_DTYPE_F32, 0}};
  CHECK(kind_of([&] {
          Result(make_cpu_backend(), one, Rows{{1}, {1}}, Rows{{0}});
        }) == ErrorKind::Internal);
  CHECK(kind_of([&] { Result(make_cpu_backend(), one, Rows{{-1}}, Rows{{0}}); }) ==
        ErrorKind::Internal);
  CHECK(kind_of([&] { Result(nullptr, one, Rows{{1}}, Rows{{0}}); }) == ErrorKind::Internal);
  CHECK(kind_of([&] {
          Result(make_cpu_backend(), {{"e", 0, EG_DTYPE_F32, 0}}, Rows{{1}}, Rows{{0}});
        }) == ErrorKind::Internal);
}

TEST_CASE("a moved Result keeps its memory and views") {
  Result a = two_outputs();
  void* data = a.output_data(1);
  Result b = std::move(a);
  CHECK(b.output_data(1) == data);
  CHECK(b.size() == 2);
}
