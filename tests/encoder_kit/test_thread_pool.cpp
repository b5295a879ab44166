// The CPU thread pool (every chunk once, exceptions rethrown on the caller,
// nested calls inline, the cpu_threads tuning option) and the fp32 CPU kernels run on
// it: the same bits on 1 and on N threads, attention against a float64
// reference, a scratch sized for fewer threads refused; and the staging
// copies it runs.
#include "kit_test_support.hpp"

#include <encgraph/sdk/host.hpp>
#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/staging_copies.hpp>
#include <encoder_kit/thread_pool.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace k = encoder_kit::cpu;
using encoder_kit::ThreadPool;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Every kernel that runs on the pool, on fixed inputs; returns all outputs
// end to end.
std::vector<float> run_kernels() {
  const int64_t rows = 300, dim = 96, heads = 3, hd = 32;
  const std::vector<int32_t> cu = {0, 70, 70, 200, 300};  // an empty sequence too
  std::vector<float> x = random_floats(static_cast<size_t>(rows * dim), 1);
  const std::vector<float> w = random_floats(static_cast<size_t>(dim), 2);
  const std::vector<float> b = random_floats(static_cast<size_t>(dim), 3);
  std::vector<float> out;
  auto keep = [&](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };

  std::vector<float> y(x.size());
  k::rms_norm(x.data(), rows, dim, w.data(), 1e-6f, y.data());
  keep(y);
  k::layer_norm(x.data(), rows, dim, w.data(), b.data(), 1e-6f, y.data());
  keep(y);
  for (auto* fn : {&k::gelu_erf, &k::gelu_tanh, &k::silu}) {
    std::vector<float> t = x;
    fn(t.data(), t.size());
    keep(t);
  }
  std::vector<float> gate = random_floats(100000, 4);  // several chunks
  const std::vector<float> up = random_floats(gate.size(), 5);
  k::silu_mul(gate.data(), up.data(), gate.size());
  keep(gate);

  // qkv [rows, 3 * heads * hd], rotary on q and k, then attention.
  const int64_t d = heads * hd;
  std::vector<float> qkv = random_floats(static_cast<size_t>(rows * 3 * d), 6);
  const std::vector<float> cs = random_floats(static_cast<size_t>(rows * hd / 2), 7);
  const std::vector<float> sn = random_floats(cs.size(), 8);
  k::rotary_half(qkv.data(), rows, 3 * d, heads, hd, cs.data(), sn.data());
  k::rotary_half(qkv.data() + d, rows, 3 * d, heads, hd, cs.data(), sn.data());
  keep(qkv);
  std::vector<float> att(static_cast<size_t>(rows * d), 0.0f);
  std::vector<float> scratch(k::attention_scratch_floats(130, hd));
  k::varlen_attention(qkv.data(), qkv.data() + d, qkv.data() + 2 * d, 3 * d, att.data(), d,
                      cu.data(), 4, heads, hd, 0.2f, scratch.data(), scratch.size());
  keep(att);
  // linear's bias add runs on the pool, but its product is OpenBLAS's, whose
  // own threading may change the product's bits (it does for OpenBLAS 0.3.21
  // on 1 and 2 threads): only the bias add is compared, on a zero product.
  const std::vector<float> zeros(x.size(), 0.0f);
  std::vector<float> lin(static_cast<size_t>(rows * dim));
  k::linear(zeros.data(), rows, dim, zeros.data(), b.data(), dim, lin.data());
  keep(lin);
  return out;
}

}  // namespace

TEST_CASE("parallel_for runs every chunk once, on slots below size()") {
  ThreadPool pool(4);
  CHECK(pool.size() == 4);
  for (const int64_t grain : {1, 3, 7, 1000}) {
    std::vector<std::atomic<int>> seen(997);
    std::atomic<bool> bad_slot{false};
    pool.parallel_for(997, grain, [&](int64_t b, int64_t e, int slot) {
      if (slot < 0 || slot >= 4 || e - b > grain) bad_slot = true;
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
    });
    CHECK_FALSE(bad_slot.load());
    for (auto& s : seen) CHECK(s.load() == 1);
  }
  pool.parallel_for(0, 1, [](int64_t, int64_t, int) { FAIL("no chunk for n = 0"); });
}

TEST_CASE("an exception in a chunk is rethrown on the caller and the pool stays usable") {
  ThreadPool pool(3);
  CHECK_THROWS_WITH_AS(pool.parallel_for(100, 1,
                                         [](int64_t b, int64_t, int) {
                                           if (b == 42) throw std::runtime_error("chunk 42");
                                         }),
                       "chunk 42", std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  CHECK(sum.load() == 4950);
}

TEST_CASE("parallel_for from inside a chunk runs inline, without deadlock") {
  ThreadPool pool(2);
  std::atomic<int64_t> count{0};
  pool.parallel_for(8, 1, [&](int64_t, int64_t, int outer) {
    pool.parallel_for(10, 2, [&](int64_t b, int64_t e, int inner) {
      CHECK(inner == outer);  // same thread, same scratch slot
      count += e - b;
    });
  });
  CHECK(count.load() == 80);
}

TEST_CASE("a pool of one runs on the caller; pools start and stop cleanly") {
  for (int i = 0; i < 20; ++i) {
    ThreadPool pool(1 + i % 5);
    int64_t n = 0;
    if (pool.size() == 1)
      pool.parallel_for(5, 1, [&](int64_t b, int64_t e, int) { n += e - b; });  // no race: inline
    else
      pool.parallel_for(5, 1, [](int64_t, int64_t, int) {});
    if (pool.size() == 1) CHECK(n == 5);
  }
  CHECK(ThreadPool(0).size() == 1);
}

namespace {
// A host table whose tuning option cpu_threads is `g_threads` (nullptr: unset).
const char* g_threads = nullptr;
const char* threads_option(void*, const char* key) {
  return std::string(key) == "cpu_threads" ? g_threads : nullptr;
}
}  // namespace

TEST_CASE("the tuning option cpu_threads sets the default thread count") {
  const int machine = encoder_kit::default_cpu_threads();
  CHECK(machine >= 1);
  eg_host_api api{};
  api.abi_major = EG_ABI_VERSION_MAJOR;
  api.abi_minor = EG_ABI_VERSION_MINOR;
  api.struct_size = sizeof(eg_host_api);
  api.tuning_option = threads_option;
  const eg_host_api* before = encgraph::sdk::host().api();
  encgraph::sdk::host().attach(&api, "test");
  g_threads = "3";
  CHECK(encoder_kit::default_cpu_threads() == 3);
  g_threads = "zero";  // the runtime refuses it; should one arrive, the machine's count
  CHECK(encoder_kit::default_cpu_threads() == machine);
  g_threads = nullptr;
  CHECK(encoder_kit::default_cpu_threads() == machine);
  // A 1.2 runtime's table has no option service: never read past its end.
  api.struct_size = EG_HOST_API_V1_1_SIZE;
  g_threads = "3";
  CHECK(encoder_kit::default_cpu_threads() == machine);
  encgraph::sdk::host().attach(before, "test");
}

TEST_CASE("kernels give the same bits on 1 and on N threads") {
  // Bit equality is legitimate here, unlike against a reference: each output
  // element is computed by one task with the same operations in the same
  // order whatever the thread count; only which thread runs it changes.
  k::set_threads(1);
  const std::vector<float> one = run_kernels();
  for (const int n : {2, 5}) {
    k::set_threads(n);
    const std::vector<float> many = run_kernels();
    REQUIRE(many.size() == one.size());
    size_t first_diff = one.size();
    for (size_t i = 0; i < one.size() && first_diff == one.size(); ++i)
      if (std::memcmp(&many[i], &one[i], sizeof(float)) != 0) first_diff = i;
    INFO("threads ", n, ": first differing float ", first_diff, " of ", one.size());
    CHECK(first_diff == one.size());
  }
  k::set_threads(encoder_kit::default_cpu_threads());
}

TEST_CASE("varlen_attention matches a float64 reference on several threads") {
  k::set_threads(3);
  // 80: Qwen's head; 36: tails in both products (36 % 8, 36 % 16); 16: none.
  for (const int64_t hd : {80, 36, 16}) {
    CAPTURE(hd);
    const int64_t heads = 2, d = heads * hd;
    const std::vector<int32_t> cu = {0, 65, 200, 203};
    const int64_t rows = cu.back();
    const std::vector<float> qkv =
        random_floats(static_cast<size_t>(rows * 3 * d), static_cast<uint32_t>(hd));
    std::vector<float> out(static_cast<size_t>(rows * d));
    std::vector<float> scratch(k::attention_scratch_floats(135, hd));
    const float scale = 0.25f;
    k::varlen_attention(qkv.data(), qkv.data() + d, qkv.data() + 2 * d, 3 * d, out.data(), d,
                        cu.data(), 3, heads, hd, scale, scratch.data(), scratch.size());
    auto at = [&](int64_t row, int64_t part, int64_t h, int64_t e) {
      return static_cast<double>(qkv[static_cast<size_t>(row * 3 * d + part * d + h * hd + e)]);
    };
    double worst = 0.0;
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = cu[s]; i < cu[s + 1]; ++i) {
          std::vector<double> p;
          double m = -1e300, sum = 0.0;
          for (int64_t j = cu[s]; j < cu[s + 1]; ++j) {
            double dot = 0.0;
            for (int64_t e = 0; e < hd; ++e) dot += at(i, 0, h, e) * at(j, 1, h, e);
            p.push_back(dot * scale);
            m = std::max(m, p.back());
          }
          for (double& v : p) sum += (v = std::exp(v - m));
          for (int64_t e = 0; e < hd; ++e) {
            double ref = 0.0;
            for (int64_t j = cu[s]; j < cu[s + 1]; ++j)
              ref += p[static_cast<size_t>(j - cu[s])] / sum * at(j, 2, h, e);
            worst = std::max(worst, std::abs(ref - out[static_cast<size_t>(i * d + h * hd + e)]));
          }
        }
    CHECK(worst < 1e-5);
  }
  k::set_threads(encoder_kit::default_cpu_threads());
}

TEST_CASE("a scratch sized for fewer threads is refused, not overrun") {
  k::set_threads(1);
  std::vector<float> scratch(k::attention_scratch_floats(64, 8));
  k::set_threads(4);
  const std::vector<int32_t> cu = {0, 64};
  std::vector<float> qkv(64 * 3 * 8, 0.5f), out(64 * 8);
  const kit_test::Failure f = kit_test::failure_of([&] {
    k::varlen_attention(qkv.data(), qkv.data() + 8, qkv.data() + 16, 24, out.data(), 8, cu.data(),
                        1, 1, 8, 1.0f, scratch.data(), scratch.size());
  });
  CHECK(f.thrown);
  CHECK(kit_test::contains(f.message, "floats of scratch per thread"));
  k::set_threads(encoder_kit::default_cpu_threads());
}

// The copies that stage a batch: every byte lands, whether the queue runs
// inline (under 1 MiB) or on the pool (pieces of 256 KiB, the last ones
// shorter), and run() empties the queue.
TEST_CASE("StagingCopies: small and large queues land byte for byte, then clear") {
  std::mt19937 gen(5);
  for (const size_t total : {size_t{1000}, size_t{3} << 20}) {
    CAPTURE(total);
    // Three sources of uneven sizes into one destination, back to back.
    const size_t sizes[3] = {total / 2 + 13, total / 3 + 7,
                             total - (total / 2 + 13) - (total / 3 + 7)};
    std::vector<std::vector<unsigned char>> src;
    for (const size_t n : sizes) {
      src.emplace_back(n);
      for (auto& b : src.back()) b = static_cast<unsigned char>(gen());
    }
    std::vector<unsigned char> dst(total + 64, 0xAB);  // a guard tail that must stay
    encoder_kit::StagingCopies copies;
    size_t at = 0;
    for (const auto& s : src) {
      copies.add(dst.data() + at, s.data(), s.size());
      at += s.size();
    }
    CHECK(copies.queued_bytes() == total);
    copies.run();
    CHECK(copies.queued_bytes() == 0);
    at = 0;
    for (const auto& s : src) {
      CHECK(std::memcmp(dst.data() + at, s.data(), s.size()) == 0);
      at += s.size();
    }
    for (size_t i = total; i < dst.size(); ++i) REQUIRE(dst[i] == 0xAB);
    copies.run();  // an empty queue is a no-op
    CHECK(copies.queued_bytes() == 0);
  }
}
