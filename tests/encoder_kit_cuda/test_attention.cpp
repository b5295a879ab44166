// varlen_attention_bf16 against a float64 softmax(q k^T * scale) v per
// sequence and head: uneven lengths, zero-length sequences in the middle and
// as padding, a max_seqlen above the real maximum, both block widths, head
// dims 64/72/80/96/128 and ones that are not multiples of 16, one-token
// sequences, and NaN in every token row no sequence of the call
// covers, before its first sequence too (the kernel must never read them, nor
// write those rows of out). Then the extras (AttentionExtras): grouped KV
// heads, the prefix mask, the relative-position bias and padded views.
#include "gpu_test_util.hpp"

#include <encoder_kit/cuda/check.hpp>  // detail::sm90_attention_supported

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;

namespace {

struct AttnCase {
  int heads, head_dim;
  std::vector<int> lens;  // real sequences, zero lengths allowed
  int padded_seqs;        // extra zero-length slots (cu_seqlens repeats its last value)
  int max_seqlen;         // bound passed to the kernel, >= every length
  float q_scale;          // > 1 sharpens the softmax: tests the running-max rescaling
  int tail_rows;          // token rows after the last sequence (NaN-poisoned)
  bool rotary = false;  // the fused form: varlen_attention_rotary_bf16 against a rotated reference
  // Sequences before this one are left out of the call (cu_seqlens + first_seq,
  // as a plugin passes one bucket of a batch): the call's tokens start far
  // past 0, further than max_seqs x max_seqlen, and earlier rows stay unwritten.
  int first_seq = 0;
  // Non-zero: key j's last column (j from its sequence's start) is
  // key_ramp * j, and q's last column is 1, or -1 on every third token: most
  // rows' scores climb steadily along the keys and their neighbours' in the
  // same warp fall, so one row may move the warp's running max while another
  // keeps its own. A rising row's max moves by about key_ramp * 64 * scale *
  // log2(e) a 64-key tile, in the log2 units of the kernel's slack before it
  // rescales O (online_softmax).
  float key_ramp = 0.0f;
};

void run_case(const AttnCase& ac) {
  const int H = ac.heads, D = ac.head_dim;
  std::vector<int32_t> cu{0};
  for (int l : ac.lens) cu.push_back(cu.back() + l);
  for (int i = 0; i < ac.padded_seqs; ++i) cu.push_back(cu.back());
  const int max_seqs = static_cast<int>(cu.size()) - 1;
  const int first = ac.first_seq;
  const int call_seqs = max_seqs - first;
  const int64_t covered = cu.back();
  const int64_t tokens = covered + ac.tail_rows;
  const int64_t row = int64_t{3} * H * D;

  auto qkv = random_bf16(static_cast<size_t>(tokens * row));
  for (int64_t t = 0; t < covered; ++t)  // sharpen q
    for (int64_t i = 0; i < int64_t{H} * D; ++i)
      qkv[t * row + i] = to_bf(to_f(qkv[t * row + i]) * ac.q_scale);
  if (ac.key_ramp != 0.0f)
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      for (int64_t t = cu[s]; t < cu[s + 1]; ++t)
        for (int h = 0; h < H; ++h) {
          qkv[t * row + h * D + D - 1] = to_bf(t % 3 == 0 ? -1.0f : 1.0f);
          qkv[t * row + (H + h) * D + D - 1] = to_bf(ac.key_ramp * static_cast<float>(t - cu[s]));
        }
  for (int64_t t = covered; t < tokens; ++t)
    for (int64_t i = 0; i < row; ++i) qkv[t * row + i] = to_bf(NAN);
  // Sequences left out of the call hold NaN too: a box that strayed back
  // before its sequence's start (end-aligned tails read backwards) would show.
  for (int64_t t = 0; t < cu[first]; ++t)
    for (int64_t i = 0; i < row; ++i) qkv[t * row + i] = to_bf(NAN);

  DeviceBuffer<bf16> dqkv(qkv.size()), dout(static_cast<size_t>(tokens * H * D));
  DeviceBuffer<int32_t> dcu(cu.size());
  dqkv.upload(qkv);
  dcu.upload(cu);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  // Rotary table (fused form): random angles, a row stride wider than
  // head_dim/2, NaN in rows of tokens no sequence covers. The reference rotates
  // q and k as rotary_bf16 does: fp32, rounded to bf16.
  const int half = D / 2;
  const int64_t cs_stride = half + 4;
  std::vector<float> cos_t(static_cast<size_t>(tokens * cs_stride), NAN), sin_t(cos_t.size(), NAN);
  std::vector<bf16> rotated = qkv;
  if (ac.rotary) {
    const auto angles = random_bf16(static_cast<size_t>(covered * half));
    for (int64_t t = 0; t < covered; ++t)
      for (int d = 0; d < half; ++d) {
        const float theta = 3.0f * to_f(angles[static_cast<size_t>(t * half + d)]);
        cos_t[static_cast<size_t>(t * cs_stride + d)] = std::cos(theta);
        sin_t[static_cast<size_t>(t * cs_stride + d)] = std::sin(theta);
      }
    for (int64_t t = 0; t < covered; ++t)
      for (int which = 0; which < 2; ++which)
        for (int h = 0; h < H; ++h) {
          bf16* x = &rotated[static_cast<size_t>(t * row + (which * H + h) * D)];
          const bf16* orig = &qkv[static_cast<size_t>(t * row + (which * H + h) * D)];
          for (int d = 0; d < half; ++d) {
            const float c = cos_t[static_cast<size_t>(t * cs_stride + d)];
            const float sn = sin_t[static_cast<size_t>(t * cs_stride + d)];
            const float x1 = to_f(orig[d]), x2 = to_f(orig[d + half]);
            x[d] = to_bf(x1 * c - x2 * sn);
            x[d + half] = to_bf(x2 * c + x1 * sn);
          }
        }
  }
  DeviceBuffer<float> dcos(cos_t.size()), dsin(sin_t.size());
  dcos.upload(cos_t);
  dsin.upload(sin_t);

  // ref and, per element, the weighted mean of |v|: the size of the terms the
  // softmax sums. Short sequences with cancelling terms have small results
  // but errors (P rounded to bf16) on the scale of those terms.
  std::vector<double> ref(static_cast<size_t>(tokens * H * D), 0.0), magnitude(ref.size(), 0.0);
  const auto x = to_double(rotated);
  std::vector<double> p;
  for (int s = first; s < max_seqs; ++s) {
    const int64_t b = cu[s], len = cu[s + 1] - cu[s];
    p.resize(static_cast<size_t>(len));
    for (int h = 0; h < H; ++h)
      for (int64_t i = 0; i < len; ++i) {
        const double* q = &x[(b + i) * row + h * D];
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          const double* kv = &x[(b + j) * row + (H + h) * D];
          double dot = 0.0;
          for (int d = 0; d < D; ++d) dot += q[d] * kv[d];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0.0;
        for (auto& v : p) sum += (v = std::exp(v - mx));
        double* o = &ref[(b + i) * H * D + h * D];
        double* mag = &magnitude[(b + i) * H * D + h * D];
        for (int64_t j = 0; j < len; ++j) {
          const double* v = &x[(b + j) * row + (2 * H + h) * D];
          for (int d = 0; d < D; ++d) {
            o[d] += p[j] / sum * v[d];
            mag[d] += p[j] / sum * std::fabs(v[d]);
          }
        }
      }
  }
  const size_t real_begin = static_cast<size_t>(int64_t{cu[first]} * H * D);
  const size_t real = static_cast<size_t>(covered * H * D);
  const int32_t* call_cu = dcu.get() + first;

  // Every instance of the family against the same reference: the public
  // entry (whatever the dispatch picks), both mma.sync block widths, and on
  // Hopper the TMA + wgmma kernel; the rotary form with each count of heads a
  // block.
  k::AttentionParams params;
  params.qkv = dqkv.get();
  params.cu_seqlens = call_cu;
  params.max_seqs = call_seqs;
  params.max_seqlen = ac.max_seqlen;
  params.num_heads = H;
  params.head_dim = D;
  params.scale = scale;
  params.out = dout.get();
  struct Variant {
    std::string name;
    std::function<int()> run;
  };
  std::vector<Variant> variants;
  if (ac.rotary) {
    params.rotary_cos = dcos.get();
    params.rotary_sin = dsin.get();
    params.rotary_stride = cs_stride;
    variants.push_back({"rotary, public entry", [&] {
                          return k::varlen_attention_rotary_bf16(
                              dqkv.get(), call_cu, call_seqs, ac.max_seqlen, H, D, scale,
                              dcos.get(), dsin.get(), cs_stride, dout.get(), nullptr);
                        }});
    // One head a block, two, four, every head, and the launch's pick.
    std::vector<int> counts{0, 1, 2, 4};
    if (std::find(counts.begin(), counts.end(), H) == counts.end()) counts.push_back(H);
    for (const int per_block : counts) {
      if (per_block > 0 && H % per_block != 0) continue;  // 2 of 3 heads: tested below
      variants.push_back(
          {"rotary, " + std::to_string(per_block) + " heads a block", [&, per_block] {
             k::AttentionParams forced = params;
             forced.rotary_heads_per_block = per_block;
             return k::run_attention(forced);
           }});
    }
  } else {
    variants.push_back({"public entry", [&] {
                          return k::varlen_attention_bf16(dqkv.get(), call_cu, call_seqs,
                                                          ac.max_seqlen, H, D, scale, dout.get(),
                                                          nullptr);
                        }});
    std::vector<k::AttentionKernel> kernels{k::AttentionKernel::Warps4, k::AttentionKernel::Warps8};
    if (k::detail::sm90_attention_supported()) kernels.push_back(k::AttentionKernel::Hopper);
    for (const k::AttentionKernel kernel : kernels)
      variants.push_back({k::attention_kernel_name(kernel),
                          [&, kernel] { return k::run_attention(params, kernel); }});
  }
  for (const auto& v : variants) {
    CAPTURE(v.name);
    dout.poison();
    CHECK_OK(v.run());
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = dout.download();
    // Outputs are averages of N(0,1) values: absolute tolerance on their scale.
    if (real > real_begin)
      CHECK_CLOSE(compare(
                      got, ref, 2e-2, 1e-3 * std::max(rms(ref), 1e-3),
                      [&](size_t i) { return i >= real_begin && i < real; }, &magnitude),
                  1e-2);
    size_t written_outside = 0;  // rows of sequences outside the call, and of none
    for (size_t i = 0; i < got.size(); ++i)
      if (i < real_begin || i >= real) written_outside += std::isnan(to_f(got[i])) ? 0 : 1;
    CHECK(written_outside == 0);
  }
  // The fused form rotates in shared memory only: qkv is left as it was.
  const auto after = dqkv.download();
  size_t changed = 0;
  for (size_t i = 0; i < after.size(); ++i)
    changed += std::memcmp(&after[i], &qkv[i], sizeof(bf16)) != 0 ? 1 : 0;
  CHECK(changed == 0);
}

}  // namespace

GPU_TEST_CASE("varlen attention, head_dim 80 (Qwen), uneven and empty sequences") {
  require_gpu();
  // Longer than one 128-row block and one 64-key tile; a 0 in the middle.
  run_case({3, 80, {64, 17, 1, 0, 130, 200}, 3, 256, 1.0f, 5});
  run_case({2, 80, {300}, 1, 300, 4.0f, 0});
}

GPU_TEST_CASE("varlen attention: the Hopper kernel is there on every compute capability 9.0 GPU") {
  require_gpu();
  // Guards the build: without sm_90a code the dispatch would quietly fall
  // back to mma.sync on an H100/H200 and every Hopper case above would vanish.
  int device = 0, major = 0, minor = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess);
  CAPTURE(major);
  CAPTURE(minor);
  CHECK(k::detail::sm90_attention_supported() == (major == 9 && minor == 0));
  DeviceBuffer<bf16> buf(1024);
  DeviceBuffer<int32_t> cu(2);
  k::AttentionParams p;
  p.qkv = buf.get();
  p.cu_seqlens = cu.get();
  p.max_seqs = 1;
  p.num_heads = 1;
  p.head_dim = 80;
  p.scale = 1.0f;
  p.out = buf.get();
  // The dispatch: one tile on 4 warps; longer on the Hopper kernel where it
  // runs, else on 8 warps; a rotary table on the rotary form.
  p.max_seqlen = 64;
  CHECK(k::pick_attention_kernel(p) == k::AttentionKernel::Warps4);
  p.max_seqlen = 65;
  CHECK(k::pick_attention_kernel(p) == (k::detail::sm90_attention_supported()
                                            ? k::AttentionKernel::Hopper
                                            : k::AttentionKernel::Warps8));
  DeviceBuffer<float> table(64);
  p.rotary_cos = table.get();
  CHECK(k::pick_attention_kernel(p) == k::AttentionKernel::WarpsRotary);
  p.rotary_cos = nullptr;
  // Rejected, not trapped, where it cannot run.
  const int bad = static_cast<int>(cudaErrorInvalidValue);
  if (!k::detail::sm90_attention_supported())
    CHECK(k::run_attention(p, k::AttentionKernel::Hopper) == bad);
  CHECK(k::run_attention(p, static_cast<k::AttentionKernel>(99)) == bad);
}

GPU_TEST_CASE("varlen attention, long sequences: several key tiles, sharp softmax, uneven tails") {
  require_gpu();
  // 1000 keys: 16 tiles of 64, 8 of 128, the last one partial; a second
  // sequence starting at an odd token; q scaled so the running max moves.
  run_case({2, 80, {1000, 77, 513}, 1, 1000, 3.0f, 3});
  run_case({2, 72, {730, 129}, 0, 730, 2.0f, 1});
  run_case({1, 128, {400, 1}, 2, 400, 2.0f, 0});
  // Many short sequences, one query block each: Q and K by cp.async (under 128 and
  // 64 rows) beside ones by TMA.
  run_case({2, 72, {1, 17, 63, 64, 65, 100, 127, 128, 5, 64, 1, 127}, 0, 128, 2.0f, 1});
  run_case({2, 64, {1, 17, 63, 64, 65, 100, 127, 128, 5, 64, 1, 127}, 0, 128, 2.0f, 1});
  // Just past and just short of tile and block edges: the TMA kernel's
  // end-aligned tails (a last key tile of 1 or 63 new keys over 63 or 1 the
  // tile before covered; a last query block with 1 or 127 rows of its own),
  // and Q by cp.async under 128 rows.
  run_case({2, 72, {65, 127, 255, 129}, 1, 255, 2.0f, 1});
  // Whole last tiles: lengths that are multiples of the 64- and 128-key tiles.
  run_case({2, 80, {128, 256, 192, 64}, 1, 256, 2.0f, 2});
  // Head dims padded inside 96 and 128 (zero columns in Q, K and V tiles).
  run_case({2, 88, {150, 64}, 0, 150, 1.0f, 1});
  run_case({2, 104, {130}, 1, 130, 1.0f, 0});
  run_case({1, 120, {257, 3}, 0, 257, 2.0f, 1});
}

GPU_TEST_CASE("varlen attention: scores climbing and falling along the keys (lazy running max)") {
  require_gpu();
  // head_dim 80 (scale 0.112): a ramp of 0.5 a key lifts a rising row's max by
  // about 5 log2 units a 64-key tile, under the kernel's slack of 8, so its
  // probabilities against a stale max grow up to 2^8 before it moves; 1.5 a
  // key lifts it by 15 a tile, past the slack every tile. The falling rows
  // beside them must keep their own max (lowered to the tile's, their sums
  // would overflow at 1.5). Negative ramps swap the two kinds of row. Uneven
  // tails and a short sequence besides; head_dim 72 (scale 0.118) as well.
  for (float ramp : {0.5f, 1.5f, -0.5f, -1.5f}) {
    CAPTURE(ramp);
    AttnCase ac{2, 80, {1000, 77, 300}, 1, 1000, 1.0f, 2};
    ac.key_ramp = ramp;
    run_case(ac);
    AttnCase siglip{2, 72, {729, 729}, 0, 729, 1.0f, 0};  // scale 0.118
    siglip.key_ramp = ramp;
    run_case(siglip);
  }
}

GPU_TEST_CASE("varlen attention on one bucket of a batch: cu_seqlens from a later sequence") {
  require_gpu();
  // The call sees 2 sequences of at most 200 tokens that start at token 2000
  // (a plugin passes cu_seqlens + first for a bucket of equal-length items):
  // every kernel must address tokens absolutely, past max_seqs x max_seqlen.
  AttnCase ac{2, 80, {1000, 1000, 200, 143}, 1, 200, 2.0f, 2};
  ac.first_seq = 2;
  run_case(ac);
  AttnCase siglip{2, 72, {729, 729, 729, 700}, 0, 729, 1.0f, 1};
  siglip.first_seq = 3;
  run_case(siglip);
}

GPU_TEST_CASE("varlen attention runs on every device of the process") {
  require_gpu();
  // The kernels opt in to more than 48 KiB of shared memory per device: the
  // same instantiations must launch on a second GPU after the first (data
  // parallel). One GPU: device 0 only.
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  for (int device = 0; device < count; ++device) {
    CAPTURE(device);
    REQUIRE(cudaSetDevice(device) == cudaSuccess);
    run_case({4, 80, {64, 33, 0, 64}, 2, 64, 1.0f, 2});  // 4-warp blocks
    run_case({2, 80, {200, 5}, 1, 200, 1.0f, 0});        // 8-warp blocks
    run_case({2, 72, {129}, 0, 129, 1.0f, 1});
  }
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
}

GPU_TEST_CASE("varlen attention, head_dim 80, window sequences (4-warp blocks)") {
  require_gpu();
  run_case({16, 80, {64, 48, 64, 0, 64, 7}, 4, 64, 2.0f, 3});
}

GPU_TEST_CASE("varlen attention, head_dim 72 (SigLIP so400m) and 64") {
  require_gpu();
  run_case({2, 72, {729, 3}, 0, 729, 1.0f, 2});
  run_case({3, 64, {64, 64, 64}, 2, 64, 1.0f, 0});
  run_case({2, 64, {65, 129}, 1, 192, 3.0f, 1});
}

GPU_TEST_CASE("varlen attention, head_dim 96, 128 and 40 (padded internally)") {
  require_gpu();
  run_case({2, 96, {100, 37}, 1, 128, 1.0f, 1});
  run_case({2, 128, {100, 37, 0}, 1, 160, 2.0f, 1});
  run_case({2, 128, {50, 64}, 1, 64, 1.0f, 0});
  run_case({2, 96, {64, 9}, 0, 64, 1.0f, 0});
  run_case({2, 40, {70, 5}, 0, 70, 1.0f, 0});
}

GPU_TEST_CASE("varlen attention: all sequences empty writes nothing") {
  require_gpu();
  run_case({2, 80, {0, 0}, 2, 64, 1.0f, 4});
}

GPU_TEST_CASE("varlen attention rejects unsupported head dims") {
  require_gpu();
  DeviceBuffer<bf16> buf(1024);
  DeviceBuffer<int32_t> cu(2);
  const int bad = static_cast<int>(cudaErrorInvalidValue);
  CHECK(k::varlen_attention_bf16(buf.get(), cu.get(), 1, 4, 1, 84, 1.0f, buf.get(), nullptr) ==
        bad);
  CHECK(k::varlen_attention_bf16(buf.get(), cu.get(), 1, 4, 1, 136, 1.0f, buf.get(), nullptr) ==
        bad);
}

GPU_TEST_CASE("varlen attention with rotary fused into the loads (Qwen2.5-VL windows)") {
  require_gpu();
  // Windows of up to 64 patches (one query block, one key tile), partial and
  // empty ones, a bound below 64; head dims 80, 72 (half not a multiple of 8),
  // 64 and 128; a sharp softmax so a wrong rotation shows.
  run_case({16, 80, {64, 48, 64, 0, 64, 7}, 4, 64, 2.0f, 3, true});
  run_case({3, 80, {64, 17, 1, 0, 33, 60}, 3, 64, 3.0f, 5, true});
  run_case({2, 80, {40, 1, 39}, 0, 40, 2.0f, 2, true});
  run_case({2, 72, {64, 33, 50}, 1, 64, 2.0f, 1, true});
  run_case({2, 64, {64, 64, 9}, 0, 64, 1.0f, 0, true});
  run_case({1, 128, {64, 20}, 1, 64, 2.0f, 1, true});
  run_case({2, 96, {64, 30}, 0, 64, 2.0f, 1, true});
}

GPU_TEST_CASE("varlen attention: more than 65535 query blocks (the grid's z slices)") {
  require_gpu();
  // Heads fastest puts the blocks on y and z; 70000 empty slots first push the
  // real windows past y's 65535, into the second z slice, whose tail past the
  // last block must exit. Every instance, with and without rotary.
  for (const bool rotary : {false, true}) {
    CAPTURE(rotary);
    AttnCase ac{2, 80, std::vector<int>(70000, 0), 3, 64, 2.0f, 1, rotary};
    ac.lens.insert(ac.lens.end(), {64, 33, 0, 5});
    run_case(ac);
  }
}

TEST_CASE("rotary_heads_per_block: the most heads a block that leave 16 blocks a multiprocessor") {
  // An H200's 132 multiprocessors: 65536 patch rows (1024 windows of 16
  // heads), a 224² request of 16 images (268 window slots), one image (16).
  CHECK(k::detail::rotary_heads_per_block(1024 * 16, 16, 132) == 4);
  CHECK(k::detail::rotary_heads_per_block(268 * 16, 16, 132) == 2);
  CHECK(k::detail::rotary_heads_per_block(16 * 16, 16, 132) == 1);
  CHECK(k::detail::rotary_heads_per_block(int64_t{1} << 24, 16, 132) == 16);  // at most 16
  CHECK(k::detail::rotary_heads_per_block(int64_t{1} << 24, 32, 132) == 16);
  CHECK(k::detail::rotary_heads_per_block(1024 * 16, 12, 132) == 4);  // powers of two dividing 12
  CHECK(k::detail::rotary_heads_per_block(1024 * 16, 3, 132) == 1);
  CHECK(k::detail::rotary_heads_per_block(1024 * 16, 16, 0) == 1);  // multiprocessors unknown
  CHECK(k::detail::rotary_heads_per_block(1024 * 16, 16, 16) == 16);
}

GPU_TEST_CASE("varlen attention with rotary: a sequence longer than max_seqlen stays in bounds") {
  require_gpu();
  // The caller promised 64 and a window holds 100: the kernel takes its first
  // 64 tokens and stays inside its shared-memory tile; rows past 64 are left
  // unwritten, and the next sequence is computed as usual.
  const int H = 2, D = 80;
  const std::vector<int32_t> cu{0, 100, 140};
  const int64_t row = int64_t{3} * H * D, tokens = 140;
  DeviceBuffer<bf16> qkv(static_cast<size_t>(tokens * row)),
      out(static_cast<size_t>(tokens * H * D));
  DeviceBuffer<int32_t> dcu(cu.size());
  DeviceBuffer<float> table(static_cast<size_t>(tokens * D / 2));
  qkv.upload(random_bf16(qkv.size()));
  dcu.upload(cu);
  table.upload(std::vector<float>(table.size(), 0.5f));
  out.poison();
  CHECK_OK(k::varlen_attention_rotary_bf16(qkv.get(), dcu.get(), 2, 64, H, D, 0.1f, table.get(),
                                           table.get(), D / 2, out.get(), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto got = out.download();
  size_t bad = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < H * D; ++i) {
      const bool written = !std::isnan(to_f(got[static_cast<size_t>(t * H * D + i)]));
      bad += written == (t < 64 || t >= 100) ? 0 : 1;
    }
  CHECK(bad == 0);
}

GPU_TEST_CASE("varlen attention with rotary: argument rules") {
  require_gpu();
  DeviceBuffer<bf16> buf(4096);
  DeviceBuffer<int32_t> cu(2);
  DeviceBuffer<float> table(1024);
  const int bad = static_cast<int>(cudaErrorInvalidValue);
  // Sequences over 64, a missing table, a stride below head_dim/2, one that
  // breaks 16-byte rows, a misaligned table.
  CHECK(k::varlen_attention_rotary_bf16(buf.get(), cu.get(), 1, 65, 1, 80, 1.0f, table.get(),
                                        table.get(), 40, buf.get(), nullptr) == bad);
  CHECK(k::varlen_attention_rotary_bf16(buf.get(), cu.get(), 1, 4, 1, 80, 1.0f, nullptr,
                                        table.get(), 40, buf.get(), nullptr) == bad);
  CHECK(k::varlen_attention_rotary_bf16(buf.get(), cu.get(), 1, 4, 1, 80, 1.0f, table.get(),
                                        table.get(), 36, buf.get(), nullptr) == bad);
  CHECK(k::varlen_attention_rotary_bf16(buf.get(), cu.get(), 1, 4, 1, 80, 1.0f, table.get(),
                                        table.get(), 42, buf.get(), nullptr) == bad);
  CHECK(k::varlen_attention_rotary_bf16(buf.get(), cu.get(), 1, 4, 1, 80, 1.0f, table.get() + 1,
                                        table.get(), 40, buf.get(), nullptr) == bad);
  CHECK(std::string(k::last_error_detail()).find("aligned16") != std::string::npos);
  // Heads a block: a divisor of num_heads, not negative, not past num_heads;
  // more than one only for the rotary form. A plain form given a rotary
  // table, and the rotary form without one, are refused too.
  k::AttentionParams p;
  p.qkv = buf.get();
  p.cu_seqlens = cu.get();
  p.max_seqs = 1;
  p.max_seqlen = 4;
  p.num_heads = 3;
  p.head_dim = 16;
  p.scale = 1.0f;
  p.rotary_cos = table.get();
  p.rotary_sin = table.get();
  p.rotary_stride = 8;
  p.out = buf.get();
  p.rotary_heads_per_block = 2;
  CHECK(k::run_attention(p) == bad);
  p.num_heads = 2;
  p.rotary_heads_per_block = -1;
  CHECK(k::run_attention(p) == bad);
  p.rotary_heads_per_block = 4;
  CHECK(k::run_attention(p) == bad);
  CHECK(std::string(k::last_error_detail()).find("heads_per_block") != std::string::npos);
  p.rotary_heads_per_block = 0;
  CHECK(k::run_attention(p, k::AttentionKernel::Warps4) == bad);  // a table, a plain form
  p.rotary_heads_per_block = 2;
  p.rotary_cos = nullptr;
  p.rotary_sin = nullptr;
  CHECK(k::run_attention(p, k::AttentionKernel::WarpsRotary) == bad);  // no table
  CHECK(k::run_attention(p, k::AttentionKernel::Warps4) == bad);       // 2 heads a block, plain
}

// The extras (AttentionExtras): separate q/k/v rows, grouped KV heads, the
// prefix mask, padded views and the decomposed relative-position bias, against
// a float64 softmax(scale q.k + bias) v over rows laid out as a model lays
// them: [q heads | k heads | v heads | 8 NaN columns]. Padded views' rows are
// NaN in q/k/v and must stay NaN in out, as must out's pad columns.
namespace {

struct ExtrasCase {
  std::string name;
  int seqs = 1, heads = 1, kv_heads = 1, head_dim = 64, seq_len = 1;
  int prefix = 0;
  int hn = 0, wn = 0;   // > 0: the bias over an hn x wn grid (hn * wn == seq_len)
  int view_count = -1;  // -1: no view_count
  int seqs_per_view = 1;
  // K and V in a buffer of their own, at another row stride than Q (their
  // columns in Q's rows are NaN then).
  bool split_kv = false;
};

void run_extras(const ExtrasCase& ec) {
  CAPTURE(ec.name);
  const int H = ec.heads, KV = ec.kv_heads, D = ec.head_dim, L = ec.seq_len;
  const int group = H / KV;
  const int64_t stride = int64_t{H + 2 * KV} * D + 8;
  const int64_t out_stride = int64_t{H} * D + 8;
  const int64_t rows = int64_t{ec.seqs} * L;
  const int64_t real_seqs =
      ec.view_count < 0 ? ec.seqs
                        : std::min<int64_t>(ec.seqs, int64_t{ec.view_count} * ec.seqs_per_view);
  auto qkv = random_bf16(static_cast<size_t>(rows * stride));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < stride; ++c)
      if (c >= stride - 8 || r >= real_seqs * L)
        qkv[static_cast<size_t>(r * stride + c)] = to_bf(NAN);
  const bool bias = ec.hn > 0;
  // Tables of 2n - 1 rows zero-padded to a multiple of 8 (get_rel_pos's,
  // resized); entries of 0.1 move a logit by about 0.1 * sqrt(head_dim).
  auto table = [&](int n) {
    const int padded = (2 * n - 1 + 7) / 8 * 8;
    auto t = random_bf16(static_cast<size_t>(padded) * D, 0.1f);
    for (size_t i = static_cast<size_t>(2 * n - 1) * D; i < t.size(); ++i) t[i] = to_bf(0.0f);
    return t;
  };
  const std::vector<bf16> rel_h = bias ? table(ec.hn) : std::vector<bf16>(8);
  const std::vector<bf16> rel_w = bias ? table(ec.wn) : std::vector<bf16>(8);
  DeviceBuffer<bf16> dqkv(qkv.size()), dout(static_cast<size_t>(rows * out_stride));
  DeviceBuffer<bf16> drh(rel_h.size()), drw(rel_w.size());
  DeviceBuffer<int32_t> dviews(1);
  dqkv.upload(qkv);
  drh.upload(rel_h);
  drw.upload(rel_w);
  dviews.upload({ec.view_count});
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  const auto x = to_double(qkv), rh = to_double(rel_h), rw = to_double(rel_w);
  const int64_t kv_stride = ec.split_kv ? int64_t{2 * KV} * D + 16 : stride;
  std::vector<bf16> kv_rows(ec.split_kv ? static_cast<size_t>(rows * kv_stride) : 8, to_bf(NAN));
  if (ec.split_kv) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < int64_t{2 * KV} * D; ++c) {
        bf16& from = qkv[static_cast<size_t>(r * stride + int64_t{H} * D + c)];
        kv_rows[static_cast<size_t>(r * kv_stride + c)] = from;
        from = to_bf(NAN);
      }
    dqkv.upload(qkv);
  }
  DeviceBuffer<bf16> dkv(kv_rows.size());
  dkv.upload(kv_rows);
  std::vector<double> ref(static_cast<size_t>(rows * out_stride), 0.0), mag(ref.size(), 0.0);
  std::vector<double> p(static_cast<size_t>(L));
  auto dot = [&](const double* a, const double* b) {
    double s = 0.0;
    for (int d = 0; d < D; ++d) s += a[d] * b[d];
    return s;
  };
  for (int64_t s = 0; s < real_seqs; ++s)
    for (int h = 0; h < H; ++h) {
      const int kvh = h / group;
      for (int i = 0; i < L; ++i) {
        const double* q = &x[static_cast<size_t>((s * L + i) * stride + h * D)];
        const int visible = ec.prefix > 0 ? (i < ec.prefix ? ec.prefix : i + 1) : L;
        // The query's products with every table row, once.
        std::vector<double> qh, qw;
        if (bias) {
          for (int r = 0; r < 2 * ec.hn - 1; ++r)
            qh.push_back(dot(q, &rh[static_cast<size_t>(r) * D]));
          for (int r = 0; r < 2 * ec.wn - 1; ++r)
            qw.push_back(dot(q, &rw[static_cast<size_t>(r) * D]));
        }
        double mx = -INFINITY;
        for (int j = 0; j < visible; ++j) {
          const double* kk = &x[static_cast<size_t>((s * L + j) * stride + (H + kvh) * D)];
          double v = scale * dot(q, kk);
          if (bias) {
            const int qy = i / ec.wn, qx = i % ec.wn, ky = j / ec.wn, kx = j % ec.wn;
            v += qh[static_cast<size_t>(qy - ky + ec.hn - 1)] +
                 qw[static_cast<size_t>(qx - kx + ec.wn - 1)];
          }
          p[static_cast<size_t>(j)] = v;
          mx = std::max(mx, v);
        }
        double sum = 0.0;
        for (int j = 0; j < visible; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[j] - mx));
        double* o = &ref[static_cast<size_t>((s * L + i) * out_stride + h * D)];
        double* m = &mag[static_cast<size_t>((s * L + i) * out_stride + h * D)];
        for (int j = 0; j < visible; ++j) {
          const double* v = &x[static_cast<size_t>((s * L + j) * stride + (H + KV + kvh) * D)];
          for (int d = 0; d < D; ++d) {
            o[d] += p[static_cast<size_t>(j)] / sum * v[d];
            m[d] += p[static_cast<size_t>(j)] / sum * std::fabs(v[d]);
          }
        }
      }
    }

  k::AttentionExtras ex;
  ex.q = dqkv.get();
  ex.k = ec.split_kv ? dkv.get() : dqkv.get() + int64_t{H} * D;
  ex.v = ec.split_kv ? dkv.get() + int64_t{KV} * D : dqkv.get() + int64_t{H + KV} * D;
  ex.q_stride = stride;
  ex.kv_stride = kv_stride;
  ex.out_stride = out_stride;
  ex.kv_heads = KV;
  ex.prefix = ec.prefix;
  if (bias) {
    ex.rel_h = drh.get();
    ex.rel_w = drw.get();
    ex.hn = ec.hn;
    ex.wn = ec.wn;
  }
  if (ec.view_count >= 0) {
    ex.view_count = dviews.get();
    ex.seqs_per_view = ec.seqs_per_view;
  }
  k::AttentionParams params;
  params.max_seqs = ec.seqs;
  params.max_seqlen = L;
  params.num_heads = H;
  params.head_dim = D;
  params.scale = scale;
  params.out = dout.get();
  params.extras = &ex;
  // The dispatch: Hopper for sequences past one tile where it takes them.
  const bool hopper = k::detail::sm90_attention_supported() && k::hopper_takes_extras(params);
  CHECK(k::pick_attention_kernel(params) ==
        (hopper && L > 64 ? k::AttentionKernel::Hopper : k::AttentionKernel::Warps4));
  auto real = [&](size_t i) {
    const int64_t r = static_cast<int64_t>(i) / out_stride,
                  c = static_cast<int64_t>(i) % out_stride;
    return r < real_seqs * L && c < int64_t{H} * D;
  };
  // Every instance that takes the case, forced, short sequences included.
  std::vector<k::AttentionKernel> kernels{k::AttentionKernel::Warps4};
  if (hopper) kernels.push_back(k::AttentionKernel::Hopper);
  for (const k::AttentionKernel kernel : kernels) {
    CAPTURE(k::attention_kernel_name(kernel));
    dout.poison();
    CHECK_OK(k::run_attention(params, kernel));
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = dout.download();
    // The bias products are rounded to bf16 in the kernel (as the model's
    // bf16 reference computes them): a looser relative tolerance with a bias.
    if (real_seqs > 0)
      CHECK_CLOSE(
          compare(got, ref, bias ? 5e-2 : 2e-2, 1e-3 * std::max(rms(ref), 1e-3), real, &mag),
          bias ? 2e-2 : 1e-2);
    size_t written_outside = 0;  // padded views' rows and the pad columns
    for (size_t i = 0; i < got.size(); ++i)
      if (!real(i)) written_outside += std::isnan(to_f(got[i])) ? 0 : 1;
    CHECK(written_outside == 0);
  }
}

}  // namespace

GPU_TEST_CASE("attention extras: grouped KV heads, one token, short sequences, odd head dims") {
  require_gpu();
  run_extras({"one token, 4 heads over 2", 3, 4, 2, 64, 1});
  run_extras({"3 tokens, head_dim 8, 6 heads over 3", 2, 6, 3, 8, 3});
  run_extras({"17 tokens, head_dim 24, 6 heads over 1", 2, 6, 1, 24, 17});
  run_extras({"130 tokens, head_dim 40, 14 heads over 2", 2, 14, 2, 40, 130});
  run_extras({"65 tokens, head_dim 56, plain heads", 1, 3, 3, 56, 65});
}

GPU_TEST_CASE("attention extras: prefix mask") {
  require_gpu();
  run_extras({"prefix 1 of 1", 2, 2, 1, 64, 1, 1});
  run_extras({"prefix 3 of 5, head_dim 24", 2, 4, 2, 24, 5, 3});
  run_extras({"prefix 70 of 140 (image | queries), 14 over 2", 2, 14, 2, 64, 140, 70});
  run_extras({"prefix 200 of 201, head_dim 40", 1, 2, 1, 40, 201, 200});
}

GPU_TEST_CASE("attention extras: decomposed relative-position bias, keys unpaired and paired") {
  require_gpu();
  run_extras({"1x1 grid (one token)", 2, 2, 2, 64, 1, 0, 1, 1});
  run_extras({"3x3, head_dim 24", 2, 2, 2, 24, 9, 0, 3, 3});
  run_extras({"7x5, head_dim 40", 2, 3, 3, 40, 35, 0, 7, 5});
  run_extras({"4x6 (paired), head_dim 8", 2, 2, 2, 8, 24, 0, 4, 6});
  run_extras({"14x14 windows (paired), head_dim 64", 3, 4, 4, 64, 196, 0, 14, 14});
  run_extras({"2x128 widest table (paired), head_dim 56", 1, 1, 1, 56, 256, 0, 2, 128});
}

// The grids the Hopper instance takes (up to 64 a side): its products of
// 127-row tables, end-aligned last tiles and query blocks, odd and even wn.
GPU_TEST_CASE("attention extras: bias grids up to 64 x 64 (the SAM's global layers)") {
  require_gpu();
  run_extras({"64x64 (SAM global at 1024)", 1, 1, 1, 64, 4096, 0, 64, 64});
  run_extras({"48x48 (SAM global at 768)", 1, 2, 2, 64, 2304, 0, 48, 48});
  run_extras({"13x11, odd wn, 3 heads over 1", 2, 3, 1, 64, 143, 0, 13, 11});
  run_extras({"9x5, shorter than a query block", 2, 2, 2, 64, 45, 0, 9, 5});
  run_extras({"5x64, one grid row a tile", 1, 2, 2, 64, 320, 0, 5, 64});
  run_extras({"64x1, one key a grid row", 1, 2, 2, 64, 64, 0, 64, 1});
  run_extras({"3x63, odd wn past a tile", 1, 2, 2, 64, 189, 0, 3, 63});
  run_extras({"10x18, head_dim 40", 2, 2, 2, 40, 180, 0, 10, 18});
  run_extras({"36x50, 4 heads over 2", 1, 4, 2, 64, 1800, 0, 36, 50});
  run_extras({"20x20, K and V apart from Q", 2, 4, 2, 64, 400, 0, 20, 20, -1, 1, true});
  run_extras({"130 tokens, no bias, K and V apart", 2, 6, 3, 40, 130, 0, 0, 0, -1, 1, true});
}

GPU_TEST_CASE("attention extras: padded views (view_count) stay unwritten") {
  require_gpu();
  run_extras({"3 of 6 windows real", 6, 2, 2, 64, 49, 0, 7, 7, 3, 1});
  run_extras({"view 1 of 2 real, 2 windows a view, prefix", 4, 4, 2, 40, 10, 5, 0, 0, 1, 2});
  run_extras({"view_count 0 writes nothing", 2, 2, 2, 64, 36, 0, 6, 6, 0, 1});
  run_extras({"2 of 5 14x14 windows real", 5, 2, 2, 64, 196, 0, 14, 14, 2, 1});
  run_extras({"view 1 of 3, no bias, 130 tokens", 3, 2, 1, 64, 130, 0, 0, 0, 1, 1});
}

GPU_TEST_CASE("attention extras: argument rules") {
  require_gpu();
  DeviceBuffer<bf16> buf(4096);
  k::AttentionExtras ex;
  ex.q = ex.k = ex.v = buf.get();
  ex.q_stride = ex.kv_stride = ex.out_stride = 3 * 64;
  ex.kv_heads = 1;
  k::AttentionParams p;
  p.max_seqs = 1;
  p.max_seqlen = 4;
  p.num_heads = 1;
  p.head_dim = 64;
  p.scale = 1.0f;
  p.out = buf.get();
  p.extras = &ex;
  const int bad = static_cast<int>(cudaErrorInvalidValue);
  CHECK(k::run_attention(p, k::AttentionKernel::Warps8) == bad);  // 4 warps or Hopper
  CHECK(k::run_attention(p, k::AttentionKernel::WarpsRotary) == bad);
  CHECK(k::hopper_takes_extras(p));
  CHECK((k::run_attention(p, k::AttentionKernel::Hopper) == 0) ==
        k::detail::sm90_attention_supported());
  p.head_dim = 72;  // the extras' instances stop at 64
  CHECK(k::run_attention(p) == bad);
  CHECK_FALSE(k::hopper_takes_extras(p));
  p.head_dim = 64;
  ex.kv_heads = 3;  // not a divisor of num_heads
  CHECK(k::run_attention(p) == bad);
  ex.kv_heads = 1;
  ex.rel_h = ex.rel_w = buf.get();
  ex.hn = 2;
  ex.wn = 3;  // 2 x 3 != 4 tokens
  CHECK(k::run_attention(p) == bad);
  ex.wn = 2;
  ex.prefix = 1;  // no prefix mask with the bias
  CHECK(k::run_attention(p) == bad);
  ex.prefix = 0;
  CHECK_OK(k::run_attention(p));
  CUDA_OK(cudaDeviceSynchronize());
  // What Hopper leaves to the 4-warp form: a prefix mask, grids past 64 a
  // side, layouts past int32 rows.
  ex.rel_h = ex.rel_w = nullptr;
  ex.prefix = 2;
  CHECK_FALSE(k::hopper_takes_extras(p));
  CHECK(k::run_attention(p, k::AttentionKernel::Hopper) == bad);
  ex.prefix = 0;
  ex.rel_h = ex.rel_w = buf.get();
  p.max_seqlen = 2 * 65;
  ex.hn = 2;
  ex.wn = 65;
  CHECK_FALSE(k::hopper_takes_extras(p));
  CHECK(k::pick_attention_kernel(p) == k::AttentionKernel::Warps4);
  CHECK(k::run_attention(p, k::AttentionKernel::Hopper) == bad);
  ex.rel_h = ex.rel_w = nullptr;
  p.max_seqs = 1 << 16;
  p.max_seqlen = 1 << 15;
  CHECK_FALSE(k::hopper_takes_extras(p));
}
