// A served model's worker end to end on the CPU toy: a batch whose forward
// fails is run again item by item, so that every image still gets its rows,
// with one batch in flight and with two (the next batch queued before one is
// collected); the rows equal a fault-free service's, bit for bit (the toy's
// rows do not depend on a batch's other items).
#include "config.hpp"
#include "serve/model_service.hpp"
#include "serve/serve_metrics.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace encgraph::host;
using namespace encgraph::host::serve;

namespace {

// Never advances: a batch is due only when full (or when the service drains).
class StoppedClock final : public Clock {
 public:
  TimePoint now() const override { return TimePoint{}; }
};

constexpr int kImages = 8;  // two full batches of four 64-token images

HostConfig service_config(int64_t fail_forward_at, int64_t batches_in_flight) {
  const std::string text =
      "[runtime]\ndevice = \"cpu\"\nuse_graphs = false\nplugin_dirs = [\"" EG_HOST_TEST_PLUGIN_DIR
      "\"]\n[plugin]\nname = \"toy_faults\"\n[plugin.config]\nhidden = 8\npatch = 14\n"
      "fail_forward_at = " +
      std::to_string(fail_forward_at) +
      "\n[budgets]\ntoken_budgets = [64, 128, 256]\nmax_items_per_batch = 4\n"
      "[serve]\ncache_bytes = 0\nbatches_in_flight = " +
      std::to_string(batches_in_flight) + "\n";
  return load_config_text(text, "serve.toml", {});
}

// A side x side RGB image ((side / 14)^2 toy tokens), different for each index.
DecodedImage image(int index, int64_t side) {
  DecodedImage im;
  im.height = im.width = side;
  im.pixels.resize(static_cast<size_t>(side * side * 3));
  std::mt19937 rng(static_cast<unsigned>(1000 + index));
  for (uint8_t& v : im.pixels) v = static_cast<uint8_t>(rng() & 0xff);
  return im;
}

struct Served {
  std::vector<ItemPtr> items = std::vector<ItemPtr>(kImages);
  std::vector<std::string> errors = std::vector<std::string>(kImages);
  int64_t batches_multi_request = 0;
  int64_t batches_split = 0;
};

// Image i (of sides[i]) sent as its own request; waits for every answer.
Served serve_images(const HostConfig& config, const std::vector<int64_t>& sides) {
  StoppedClock clock;
  ServeMetrics metrics;
  Served served;
  std::mutex mu;
  std::condition_variable answered;
  int pending = kImages;
  {
    ModelService service("toy", config, metrics, clock);
    for (int i = 0; i < kImages; ++i) {
      std::vector<ServeInput> inputs(1);
      inputs[0].pixels = image(i, sides[static_cast<size_t>(i)]);
      inputs[0].label = "images[" + std::to_string(i) + "]";
      service.infer(static_cast<uint64_t>(i), std::move(inputs),
                    [&, i](std::vector<ItemPtr> items, std::exception_ptr error, bool) {
                      std::lock_guard<std::mutex> lock(mu);
                      if (error) {
                        try {
                          std::rethrow_exception(error);
                        } catch (const std::exception& e) {
                          served.errors[i] = e.what();
                        }
                      } else if (items.size() == 1) {
                        served.items[i] = items[0];
                      }
                      --pending;
                      answered.notify_all();
                    });
    }
    std::unique_lock<std::mutex> lock(mu);
    // A bound against a hang only: the answers do not depend on it.
    answered.wait_for(lock, std::chrono::seconds(120), [&] { return pending == 0; });
  }
  CHECK(pending == 0);
  served.batches_multi_request = metrics.batches_multi_request();
  served.batches_split = metrics.batches_split();
  return served;
}

}  // namespace

TEST_CASE("a batch whose forward fails is run item by item; every image gets its rows") {
  const std::vector<int64_t> sides(kImages, 112);  // 64 tokens each
  const Served reference = serve_images(service_config(0, 1), sides);
  for (int i = 0; i < kImages; ++i) {
    REQUIRE(reference.items[i] != nullptr);
    REQUIRE(reference.items[i]->outputs.size() >= 1);
    CHECK(reference.items[i]->outputs[0].rows == 64);
  }
  CHECK(reference.batches_multi_request == 2);  // the images ran four at a time
  CHECK(reference.batches_split == 0);
  for (const int64_t in_flight : {1, 2}) {
    CAPTURE(in_flight);
    // A batch of four images is 256 tokens, a forward the plugin fails; one
    // image alone (64 tokens) runs.
    const Served s = serve_images(service_config(256, in_flight), sides);
    CHECK(s.batches_multi_request == 2);
    CHECK(s.batches_split == 2);  // both failed whole, then ran image by image
    for (int i = 0; i < kImages; ++i) {
      CAPTURE(i);
      CHECK(s.errors[i].empty());
      REQUIRE(s.items[i] != nullptr);
      REQUIRE(s.items[i]->outputs.size() == reference.items[i]->outputs.size());
      for (size_t o = 0; o < s.items[i]->outputs.size(); ++o)
        CHECK(s.items[i]->outputs[o].bytes == reference.items[i]->outputs[o].bytes);
    }
  }
}

TEST_CASE("an image that fails alone too gets an error naming it; the others their rows") {
  // Image 3 is 224 x 224: 256 tokens, a forward the plugin fails even alone.
  std::vector<int64_t> sides(kImages, 112);
  sides[3] = 224;
  const Served reference = serve_images(service_config(0, 1), sides);
  for (const int64_t in_flight : {1, 2}) {
    CAPTURE(in_flight);
    const Served s = serve_images(service_config(256, in_flight), sides);
    for (int i = 0; i < kImages; ++i) {
      CAPTURE(i);
      if (i == 3) {
        CHECK(s.items[i] == nullptr);
        CHECK(s.errors[i].find("images[3]") != std::string::npos);
        CHECK(s.errors[i].find("asked to fail") != std::string::npos);
        continue;
      }
      CHECK(s.errors[i].empty());
      REQUIRE(s.items[i] != nullptr);
      REQUIRE(reference.items[i] != nullptr);
      CHECK(s.items[i]->outputs[0].bytes == reference.items[i]->outputs[0].bytes);
    }
  }
}

TEST_CASE("no two threads call into the plugin at once: items die while requests ask sizes") {
  // The conformance plugin aborts when a call finds another running on its
  // instance. Each request below is an image of a size not seen before, so
  // its thread asks the plugin for the size's tokens (slowed to 5 ms) while
  // the worker runs full batches and then destroys their items: both must
  // hold the engine's lock.
  for (const int64_t in_flight : {1, 2}) {
    CAPTURE(in_flight);
    const std::string text =
        "[runtime]\ndevice = \"cpu\"\nuse_graphs = false\nplugin_dirs = [\"" EG_HOST_TEST_PLUGIN_DIR
        "\"]\n[plugin]\nname = \"toy_faults\"\n[plugin.config]\nhidden = 8\npatch = 14\n"
        "one_call_at_a_time = true\nspec_delay_us = 5000\n"
        "[budgets]\ntoken_budgets = [64, 128, 256]\nmax_items_per_batch = 4\n"
        "[serve]\ncache_bytes = 0\nbatches_in_flight = " +
        std::to_string(in_flight) + "\n";
    const HostConfig config = load_config_text(text, "serve.toml", {});
    StoppedClock clock;
    ServeMetrics metrics;
    constexpr int kThreads = 4, kPerThread = 16;  // 64 sizes: (14 a) x (14 b), a, b <= 8
    std::mutex mu;
    std::condition_variable answered;
    int pending = kThreads * kPerThread;
    std::vector<int64_t> rows(static_cast<size_t>(pending), -1);
    {
      ModelService service("toy", config, metrics, clock);
      std::vector<std::thread> senders;
      for (int t = 0; t < kThreads; ++t)
        senders.emplace_back([&, t] {
          for (int k = 0; k < kPerThread; ++k) {
            const int i = t * kPerThread + k;
            std::vector<ServeInput> inputs(1);
            DecodedImage& im = inputs[0].pixels;
            im.height = 14 * (1 + i % 8);
            im.width = 14 * (1 + i / 8);
            im.pixels.assign(static_cast<size_t>(im.height * im.width * 3),
                             static_cast<uint8_t>(i));
            inputs[0].label = "images[" + std::to_string(i) + "]";
            service.infer(static_cast<uint64_t>(i), std::move(inputs),
                          [&, i](std::vector<ItemPtr> items, std::exception_ptr error, bool) {
                            std::lock_guard<std::mutex> lock(mu);
                            if (!error && items.size() == 1 && !items[0]->outputs.empty())
                              rows[static_cast<size_t>(i)] = items[0]->outputs[0].rows;
                            --pending;
                            answered.notify_all();
                          });
          }
        });
      for (std::thread& s : senders) s.join();
      std::unique_lock<std::mutex> lock(mu);
      // A bound against a hang only: the answers do not depend on it.
      answered.wait_for(lock, std::chrono::seconds(120), [&] { return pending == 0; });
    }
    CHECK(pending == 0);
    for (int i = 0; i < kThreads * kPerThread; ++i) {
      CAPTURE(i);
      CHECK(rows[static_cast<size_t>(i)] == (1 + i % 8) * (1 + i / 8));  // the toy's tokens
    }
  }
}
