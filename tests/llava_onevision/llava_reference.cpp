#include "llava_reference.hpp"

#include "../reference_f64.hpp"

#include <encoder_kit/safetensors.hpp>

#include <cmath>
#include <random>

namespace llava_ref {
namespace {

// [channels, h, w] maps, row-major.
struct Map {
  int64_t c = 0, h = 0, w = 0;
  Mat v;
  double& at(int64_t ch, int64_t y, int64_t x) { return v[(ch * h + y) * w + x]; }
  double at(int64_t ch, int64_t y, int64_t x) const { return v[(ch * h + y) * w + x]; }
};

// The projector on one tile's tower rows: [g*g, text].
Mat project(const Config& c, const Params& p, const std::vector<uint8_t>& tile) {
  const siglip_ref::Outputs out = siglip_ref::forward(c.tower, p.tower, tile);
  const Mat& f = out.hidden_states.back();  // vision_feature_layer -1, strategy "full"
  const int64_t n = c.tower.tokens();
  Mat h = ref64::linear(f, n, c.tower.hidden, p.l1w, &p.l1b, c.text);
  for (double& v : h) v = ref64::gelu_erf(v);
  return ref64::linear(h, n, c.text, p.l2w, &p.l2b, c.text);
}

// F.interpolate(mode="bilinear", align_corners=False) to (oh, ow).
Map interpolate(const Map& in, int64_t oh, int64_t ow) {
  Map out{in.c, oh, ow, Mat(static_cast<size_t>(in.c * oh * ow))};
  auto source = [](int64_t d, int64_t in_size, int64_t out_size, int64_t& i0, int64_t& i1,
                   double& l1) {
    const double s = std::max(
        0.0, (static_cast<double>(d) + 0.5) * static_cast<double>(in_size) / out_size - 0.5);
    i0 = static_cast<int64_t>(std::floor(s));
    i1 = std::min(i0 + 1, in_size - 1);
    l1 = s - static_cast<double>(i0);
  };
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x) {
      int64_t y0, y1, x0, x1;
      double ly, lx;
      source(y, in.h, oh, y0, y1, ly);
      source(x, in.w, ow, x0, x1, lx);
      for (int64_t ch = 0; ch < in.c; ++ch)
        out.at(ch, y, x) = (1 - ly) * ((1 - lx) * in.at(ch, y0, x0) + lx * in.at(ch, y0, x1)) +
                           ly * ((1 - lx) * in.at(ch, y1, x0) + lx * in.at(ch, y1, x1));
    }
  return out;
}

}  // namespace

Params random_params(const Config& c, uint64_t seed) {
  Params p;
  p.tower = siglip_ref::random_params(c.tower, seed);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto draw = [&](int64_t n, double std) {
    Mat m(static_cast<size_t>(n));
    for (double& v : m) v = static_cast<double>(static_cast<float>(normal(rng) * std));
    return m;
  };
  const int64_t d = c.tower.hidden, t = c.text;
  p.l1w = draw(t * d, 1.0 / std::sqrt(static_cast<double>(d)));
  p.l1b = draw(t, 0.1);
  p.l2w = draw(t * t, 1.0 / std::sqrt(static_cast<double>(t)));
  p.l2b = draw(t, 0.1);
  p.newline = draw(t, 1.0);
  return p;
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix, const std::string& tower) {
  std::vector<encoder_kit::TensorToWrite> tensors;
  for (const auto& [name, values] : p.tower) {
    if (name.rfind("head.", 0) == 0) continue;
    tensors.push_back(encoder_kit::f32_tensor(prefix + tower + name,
                                              siglip_ref::shape_of(c.tower, name),
                                              std::vector<float>(values.begin(), values.end())));
  }
  const int64_t d = c.tower.hidden, t = c.text;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const Mat& m) {
    tensors.push_back(encoder_kit::f32_tensor(prefix + name, std::move(shape),
                                              std::vector<float>(m.begin(), m.end())));
  };
  add("multi_modal_projector.linear_1.weight", {t, d}, p.l1w);
  add("multi_modal_projector.linear_1.bias", {t}, p.l1b);
  add("multi_modal_projector.linear_2.weight", {t, t}, p.l2w);
  add("multi_modal_projector.linear_2.bias", {t}, p.l2b);
  add("image_newline", {t}, p.newline);
  encoder_kit::write_safetensors(file, tensors);
}

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c) {
  auto kv = siglip_ref::plugin_config(c.tower);
  kv.push_back({"text_hidden_size", std::to_string(c.text)});
  kv.push_back({"vision_aspect_ratio", "anyres_max_" + std::to_string(c.max_num_patches)});
  // 1..3 x 1..3 tiles of the tower's image size.
  std::string pins = "[";
  for (int64_t h = 1; h <= 3; ++h)
    for (int64_t w = 1; w <= 3; ++w)
      pins += (pins.size() > 1 ? ", " : "") + std::to_string(h * c.tower.image) + ", " +
              std::to_string(w * c.tower.image);
  kv.push_back({"image_grid_pinpoints", pins + "]"});
  return kv;
}

Mat image_features(const Config& c, const Params& p, const std::vector<std::vector<uint8_t>>& tiles,
                   int64_t grid_rows, int64_t grid_cols, int64_t height, int64_t width) {
  const int64_t g = c.grid(), t = c.text;
  std::vector<Mat> feats;
  for (const auto& tile : tiles) feats.push_back(project(c, p, tile));
  // image_feature.view(gr, gc, g, g, C).permute(4, 0, 2, 1, 3).flatten: [C, gr g, gc g].
  Map m{t, grid_rows * g, grid_cols * g, {}};
  m.v.resize(static_cast<size_t>(m.c * m.h * m.w));
  for (int64_t i = 0; i < grid_rows; ++i)
    for (int64_t j = 0; j < grid_cols; ++j)
      for (int64_t y = 0; y < g; ++y)
        for (int64_t x = 0; x < g; ++x)
          for (int64_t ch = 0; ch < t; ++ch)
            m.at(ch, i * g + y, j * g + x) = feats[1 + i * grid_cols + j][(y * g + x) * t + ch];
  // unpad_image.
  int64_t y0 = 0, y1 = m.h, x0 = 0, x1 = m.w;
  const double original_aspect = static_cast<double>(width) / height;
  const double current_aspect = static_cast<double>(m.w) / m.h;
  if (original_aspect > current_aspect) {
    const double scale = static_cast<double>(m.w) / width;
    const auto new_h = static_cast<int64_t>(std::round(height * scale * 1e7) / 1e7);
    const int64_t pad = (m.h - new_h) / 2;
    y0 = pad, y1 = m.h - pad;
  } else {
    const double scale = static_cast<double>(m.h) / height;
    const auto new_w = static_cast<int64_t>(std::round(width * scale * 1e7) / 1e7);
    const int64_t pad = (m.w - new_w) / 2;
    x0 = pad, x1 = m.w - pad;
  }
  Map u{t, y1 - y0, x1 - x0, {}};
  u.v.resize(static_cast<size_t>(u.c * u.h * u.w));
  for (int64_t ch = 0; ch < t; ++ch)
    for (int64_t y = 0; y < u.h; ++y)
      for (int64_t x = 0; x < u.w; ++x) u.at(ch, y, x) = m.at(ch, y0 + y, x0 + x);
  // anyres_max_<n>.
  const double ratio =
      std::sqrt(static_cast<double>(u.h * u.w) / static_cast<double>(c.max_num_patches * g * g));
  if (ratio > 1.1)
    u = interpolate(u, static_cast<int64_t>(std::floor(u.h / ratio)),
                    static_cast<int64_t>(std::floor(u.w / ratio)));
  // The base image's rows, then the map row by row, a newline closing each row.
  Mat out = feats[0];
  for (int64_t y = 0; y < u.h; ++y) {
    for (int64_t x = 0; x < u.w; ++x)
      for (int64_t ch = 0; ch < t; ++ch) out.push_back(u.at(ch, y, x));
    out.insert(out.end(), p.newline.begin(), p.newline.end());
  }
  return out;
}

Mat video_features(const Config& c, const Params& p,
                   const std::vector<std::vector<uint8_t>>& frames) {
  const int64_t g = c.grid(), t = c.text, side = (g + 1) / 2;
  Mat out;
  for (const auto& frame : frames) {
    const Mat f = project(c, p, frame);
    Map m{t, g, g, Mat(static_cast<size_t>(t * g * g))};
    for (int64_t y = 0; y < g; ++y)
      for (int64_t x = 0; x < g; ++x)
        for (int64_t ch = 0; ch < t; ++ch) m.at(ch, y, x) = f[(y * g + x) * t + ch];
    const Map pooled = interpolate(m, side, side);
    for (int64_t y = 0; y < side; ++y)
      for (int64_t x = 0; x < side; ++x)
        for (int64_t ch = 0; ch < t; ++ch) out.push_back(pooled.at(ch, y, x));
  }
  out.insert(out.end(), p.newline.begin(), p.newline.end());
  return out;
}

}  // namespace llava_ref
