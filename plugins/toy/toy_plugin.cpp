// The "toy" plugin: the toy model (toy_model.hpp) with one path; both outputs
// ("rows", "pooled") go through the runtime's default copy.
#include "toy_model.hpp"

namespace {

class ToyPlugin : public toy::Toy {
 public:
  static constexpr encgraph::sdk::Identity identity{"toy", "1.0.0", toy::kDescription,
                                                    toy::kModalities, toy::kDevices};
  explicit ToyPlugin(encgraph::sdk::CreateArgs& args) : Toy(args, toy::Form::Single) {}
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(ToyPlugin)
