// A build without the kit's CUDA kernels: the plugins run on the CPU only,
// and a CUDA instance is refused before its weights load.
#include "forward.hpp"
#include "spec.hpp"

#include <encoder_kit/error.hpp>

#include <string>

namespace qwen_vl {

void require_cuda_forward(const Spec& s) {
  encoder_kit::fail(
      EG_ERR_UNSUPPORTED,
      std::string(s.name) + " was built without its CUDA kernels; use device = \"cpu\"");
}

std::unique_ptr<CudaModel> make_cuda_model(const Options& o, const Weights&, int, Warn) {
  require_cuda_forward(o.spec());
  return nullptr;  // not reached
}

}  // namespace qwen_vl
