// A serving program embedding encgraph: load a plugin by name, capture the
// budget graphs, encode a batch of items, read the results and statistics.
// Built with the project (target example_embedding) and run by the tests.
//   example_embedding [plugin-dir]
#include <encgraph/error.hpp>
#include <encgraph/runtime.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  encgraph::RuntimeConfig config;
  config.plugin = "toy";
  if (argc > 1) config.plugin_dirs.emplace_back(argv[1]);
  config.device = "auto";                    // CUDA when present, else the CPU
  config.plugin_config = {{"hidden", "8"}};  // the plugin's own table, flattened
  config.budgets.token_budgets = {64, 256, 1024};
  config.budgets.max_items_per_batch = 8;
  try {
    encgraph::Runtime runtime(config);
    runtime.capture();

    // Items belong to the runtime's plugin instance (and keep it alive).
    std::vector<encgraph::Item> items;
    for (int i = 0; i < 5; ++i) {
      eg_item_desc d{};
      d.modality = EG_MODALITY_IMAGE;
      d.height = 14 * (2 + i);
      d.width = 14 * 4;
      d.frames = 1;
      d.seed = static_cast<uint64_t>(i);  // synthetic pixels; set d.pixels for real ones
      items.push_back(runtime.make_item(d));
    }
    const encgraph::Result result = runtime.execute(items);  // one device allocation
    for (size_t i = 0; i < result.size(); ++i) {
      const std::vector<float> rows = result.item_as_float(i);  // copies to the host
      std::printf("item %zu: %lld rows x %lld, first value %.4f\n", i,
                  static_cast<long long>(result.rows(i)),
                  static_cast<long long>(result.hidden_size()), rows.empty() ? 0.0f : rows[0]);
    }
    const encgraph::Stats s = runtime.stats();
    // An item is a hit when every path it used replayed a graph. A batch far
    // below its budget may run eagerly when timing says that is faster
    // (RuntimeConfig::prefer_faster_path): its items are then misses, with the
    // reason "chosen as faster" in the per-path statistics.
    int64_t eager_without_choice = 0;
    for (const encgraph::PathStats& p : s.paths)
      eager_without_choice +=
          p.batches_eager -
          p.eager_by_reason[static_cast<int>(encgraph::EagerReason::ChosenFaster)];
    std::printf(
        "graphs %lld, hits %lld, misses %lld, eager by choice %lld batches, "
        "padded-token efficiency %.2f on %s\n",
        static_cast<long long>(s.num_graphs), static_cast<long long>(s.graph_hits),
        static_cast<long long>(s.graph_misses), static_cast<long long>(s.batches_eager_chosen),
        s.padded_token_efficiency, runtime.device_name().c_str());
    const bool all_encoded = result.size() == 5 && result.rows(4) == 24;
    // Every item fits a captured budget: nothing ran eagerly for want of a graph.
    return all_encoded && eager_without_choice == 0 ? 0 : 1;
  } catch (const encgraph::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
