// siglip_bench: how many images per second the siglip plugin encodes through
// the runtime with captured graphs and eagerly, on the same synthetic images
// at the model's resolution (the plugin draws them at that size, so the timed
// part is the encoder, not host-side resizing).
//
//   siglip_bench [--device cuda] [--weights random] [--set key=value]...
//                [--images 512] [--request-size 64] [--repeats 3]
//                [--modes graphs,eager] [--budgets a,b] [--max-items N]
//
// Per mode it prints a table row and a line "RESULT {json}" for scripts. Each
// repeat runs every image once, request by request (one execute() call per
// request), and waits for the last result; the best repeat counts.
#include "../../tests/plugin_tool_support.hpp"

#include <encgraph/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Args {
  encgraph::RuntimeConfig rc;
  int64_t images = 512;
  int64_t request_size = 64;
  int repeats = 3;
  std::vector<std::string> modes = {"graphs", "eager"};
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "siglip_bench: " << why
            << "\nusage: siglip_bench [--device D] [--weights W] [--set k=v]... [--images N] "
               "[--request-size N] [--repeats N] [--modes graphs,eager] [--budgets a,b] "
               "[--max-items N]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  a.rc.plugin = "siglip";
  a.rc.plugin_dirs = {ENCGRAPH_BENCH_PLUGIN_DIR};
  a.rc.device = "cuda";
  a.rc.weights = "random";
  a.rc.stats_log_interval = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(k + " needs a value");
      return argv[++i];
    };
    if (encgraph::tool::apply_runtime_option(k, value, usage, a.rc)) continue;
    if (k == "--images") {
      a.images = std::stoll(value());
    } else if (k == "--request-size") {
      a.request_size = std::stoll(value());
    } else if (k == "--repeats") {
      a.repeats = std::stoi(value());
    } else if (k == "--modes") {
      a.modes = encgraph::tool::split(value(), ',');
    } else {
      usage("unknown argument " + k);
    }
  }
  if (a.images <= 0 || a.request_size <= 0 || a.repeats <= 0)
    usage("--images, --request-size and --repeats must be positive");
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One full pass over the images, request by request.
void run_pass(encgraph::Runtime& rt, const std::vector<encgraph::Item>& items, int64_t request) {
  encgraph::Result last;
  for (size_t first = 0; first < items.size(); first += static_cast<size_t>(request)) {
    std::vector<const encgraph::Item*> batch;
    for (size_t i = first; i < std::min(items.size(), first + static_cast<size_t>(request)); ++i)
      batch.push_back(&items[i]);
    last = rt.execute(batch);
  }
  last.wait();  // stream order: every earlier request is done too
}

void bench_mode(const Args& a, const std::string& mode) {
  encgraph::RuntimeConfig rc = a.rc;
  if (mode != "graphs" && mode != "eager") usage("mode '" + mode + "' is not graphs or eager");
  rc.use_graphs = mode == "graphs";
  encgraph::Runtime rt(rc);
  auto t0 = std::chrono::steady_clock::now();
  if (rc.use_graphs) rt.capture();
  const double capture_s = seconds_since(t0);
  std::vector<encgraph::Item> items;
  for (int64_t i = 0; i < a.images; ++i) {
    eg_item_desc d{};
    d.modality = EG_MODALITY_IMAGE;
    d.channels = 3;
    d.height = d.width = 384;  // any size: synthetic images are drawn at the model's
    d.frames = 1;
    d.seed = static_cast<uint64_t>(i + 1);
    items.push_back(rt.make_item(d));
  }
  {  // warm-up: one request (first launches, algorithm choices of eager sizes)
    std::vector<const encgraph::Item*> first;
    for (int64_t i = 0; i < std::min(a.request_size, a.images); ++i) first.push_back(&items[i]);
    rt.execute(first).wait();
  }
  double best = 1e30;
  for (int r = 0; r < a.repeats; ++r) {
    t0 = std::chrono::steady_clock::now();
    run_pass(rt, items, a.request_size);
    best = std::min(best, seconds_since(t0));
  }
  const encgraph::Stats st = rt.stats();
  const double rate = static_cast<double>(a.images) / best;
  std::printf(
      "%-7s %6lld images  %8.3f s  %9.1f images/s  capture %6.2f s  hit rate %5.1f%%  "
      "padding efficiency %5.1f%%\n",
      mode.c_str(), static_cast<long long>(a.images), best, rate, capture_s, 100.0 * st.hit_rate,
      100.0 * st.padded_token_efficiency);
  std::printf(
      "RESULT {\"mode\": \"%s\", \"images\": %lld, \"request_size\": %lld, \"seconds\": "
      "%.6f, \"images_per_s\": %.3f, \"capture_s\": %.3f, \"graphs\": %lld, "
      "\"hit_rate\": %.4f, \"padded_token_efficiency\": %.4f, \"device\": \"%s\"}\n",
      mode.c_str(), static_cast<long long>(a.images), static_cast<long long>(a.request_size), best,
      rate, capture_s, static_cast<long long>(st.num_graphs), st.hit_rate,
      st.padded_token_efficiency, rt.device_name().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    for (const std::string& mode : a.modes) bench_mode(a, mode);
  } catch (const std::exception& e) {
    std::cerr << "siglip_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
