#include "toy_config.hpp"

#include <encgraph/sdk/error.hpp>

namespace toy {

namespace {
// Bounds that keep every product the plugin computes (budget x hidden, ...)
// far inside 64 bits.
constexpr int64_t kMaxBudget = int64_t{1} << 30;
}  // namespace

Options parse_options(encgraph::sdk::Config& c, const std::optional<std::string>& weights) {
  Options o;
  o.plugin = c.plugin();
  o.hidden = c.get<int64_t>("hidden", o.hidden, {1, 65536});
  o.patch = c.get<int64_t>("patch", o.patch, {1, int64_t{1} << 20});
  // Their order and positivity are the runtime's to check (the budget range).
  o.min_budget = c.get<int64_t>("min_budget", o.min_budget, {-kMaxBudget, kMaxBudget});
  o.max_budget = c.get<int64_t>("max_budget", o.max_budget, {-kMaxBudget, kMaxBudget});
  o.local_min_tokens = c.get<int64_t>("local_min_tokens", o.local_min_tokens, {0, kMaxBudget});
  o.local_min_budget = c.get<int64_t>("local_min_budget", o.local_min_budget, {0, kMaxBudget});
  o.max_frames_per_video =
      c.get<int64_t>("max_frames_per_video", o.max_frames_per_video, {0, 65536});
  o.extra_kernels = c.get<int64_t>("extra_kernels", o.extra_kernels, {0, int64_t{1} << 20});
  o.cpu_us_per_1k_tokens = c.get<int64_t>("cpu_us_per_1k_tokens", 0, {0, 1000000});
  o.cpu_eager_us_per_1k_tokens = c.get<int64_t>("cpu_eager_us_per_1k_tokens", 0, {0, 1000000});
  o.check_padding = c.get<bool>("check_padding", o.check_padding);
  o.pooled = c.get<bool>("pooled", o.pooled);
  o.bias = c.get<float>("bias", o.bias);
  o.axis_keys = c.get<std::vector<int64_t>>("capture_axis_keys", {}, {1, 65536});
  if (weights && *weights != "random" && *weights != "none")
    encgraph::sdk::invalid("the toy plugin has no weights; got weights = '" + *weights +
                           "' (use \"random\" or leave it unset)");
  return o;
}

int64_t checked_mul(const Options& o, int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    encgraph::sdk::invalid(o.plugin + ": " + what + " overflows 64 bits (" + std::to_string(a) +
                           " x " + std::to_string(b) + ")");
  return r;
}

}  // namespace toy
