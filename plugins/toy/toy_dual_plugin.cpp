// The "toy_dual" plugin: the toy model (toy_model.hpp) with a global path (one
// summary row per item) and a local path (the item's rows, skipped below
// local_min_tokens), assembled by its own post-processing.
#include "toy_model.hpp"

namespace {

class ToyDual : public toy::Toy {
 public:
  static constexpr encgraph::sdk::Identity identity{"toy_dual", "1.0.0", toy::kDescription,
                                                    toy::kModalities, toy::kDevices};
  explicit ToyDual(encgraph::sdk::CreateArgs& args) : Toy(args, toy::Form::Dual) {}
  void postprocess_outputs(const encgraph::sdk::PostprocessArgs<Item>& args) const {
    assemble(args);
  }
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(ToyDual)
