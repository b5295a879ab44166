// Matrix products of our own on Hopper (sm_90a), for what cuBLASLt's epilogues
// cannot fuse: C = A W^T (+ bias) with the SwiGLU product silu(gate) * up in the
// epilogue, so the MLP's [gate | up] output never reaches global memory.
//
// Layout of a block (FlashAttention-3 / CUTLASS "warp-specialised" form):
//  - warpgroup 0 copies: one thread issues TMA loads of A (128 x 64) and W
//    (256 x 64) boxes into a ring of kStages stages, each completing on the
//    stage's "full" mbarrier; it gives most of its registers back;
//  - warpgroups 1 and 2 multiply: each owns 64 rows of the 128 x 256 tile and
//    runs m64n256k16 wgmma steps on the staged boxes (128-byte swizzled,
//    K-major), keeping one k-block of products in flight; after a stage's
//    products have completed, each of their warps arrives on its "empty"
//    mbarrier, and the copier reuses the stage once all eight have.
//  - the epilogue runs from the accumulators: bias, then either the plain bf16
//    product or, with W's rows blocked as [128 gate | 128 up] per tile, the
//    SwiGLU product of the two halves (gate_up_silu_mul_bf16). The tile is
//    staged in shared memory as 128-byte swizzled 128 x 64 boxes, and one
//    thread stores them by TMA while the next tile's products start.
// One persistent block a multiprocessor, looping over tiles: 3 stages (144
// KiB) and a 64 KiB output tile for the plain product, 4 stages (192 KiB) and
// 32 KiB for SiLU·mul. Steps and measurements: bench/kernels/NOTES.md.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "attention_sm90_common.cuh"
#include "launch.cuh"
#include "smem_opt_in.hpp"
#include "tma_sm90.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace encoder_kit::cuda {
namespace {

using namespace ptx;
using namespace sm90;

constexpr int kBM = 128, kBN = 256, kBK = 64;
static_assert(kGateUpBlock * 2 == kBN, "a tile holds one block of gate rows and one of up rows");
constexpr uint32_t kABytes = kBM * kBK * 2;       // 16 KiB a stage
constexpr uint32_t kWBytes = kBN * kBK * 2;       // 32 KiB a stage
constexpr uint32_t kSubTileBytes = kBM * 64 * 2;  // one 128 x 64 box of the output, 16 KiB

enum class Fused { Bias, SiluMul };

// The output tile is staged in shared memory as 128 x 64 boxes (128-byte
// swizzled, as TMA stores them): 4 for the plain product, 2 for SiLU·mul,
// whose tile is half as wide. What is left of the 227 KiB holds the stages.
template <Fused kFused>
__host__ __device__ constexpr int out_boxes() {
  return kFused == Fused::Bias ? 4 : 2;
}
template <Fused kFused>
__host__ __device__ constexpr int stages() {
  return kFused == Fused::Bias ? 3 : 4;
}
template <Fused kFused>
constexpr size_t smem_bytes() {
  return 1024 /* alignment slack */ + stages<kFused>() * (kABytes + kWBytes) +
         out_boxes<kFused>() * kSubTileBytes + 2 * stages<kFused>() * sizeof(uint64_t);
}

// The 256 multiplying threads, apart from the copier (named barrier 1).
__device__ __forceinline__ void sync_multipliers() {
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

template <Fused kFused>
__global__ void __launch_bounds__(384, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                     const __grid_constant__ CUtensorMap map_w,
                     const __grid_constant__ CUtensorMap map_out, const bf16* __restrict__ bias,
                     int64_t bias_len, int k_blocks, int n_tiles, int num_tiles) {
#if ENCODER_KIT_HAS_WGMMA
  constexpr int kStages = stages<kFused>();
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // 128-byte swizzle atoms
  const uint32_t s_a = base;
  const uint32_t s_w = base + kStages * kABytes;
  const uint32_t s_out = s_w + kStages * kWBytes;
  const uint32_t full = s_out + out_boxes<kFused>() * kSubTileBytes;  // kStages mbarriers,
  const uint32_t empty = full + kStages * 8;                          // then kStages "empty"
  const int wg = static_cast<int>(threadIdx.x) / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full + 8 * s, 1);   // the copier's expect_tx arrival (+ the bytes)
      mbarrier_init(empty + 8 * s, 8);  // one arrival per multiplying warp
    }
    fence_barrier_init();
  }
  __syncthreads();
  detail::wait_for_prior_grid();  // A is the previous kernel's output (launch.cuh)

  // Persistent: block b takes tiles b, b + gridDim.x, ... (the tile's n index
  // fastest, so blocks running together share A's rows in L2). The stage ring
  // runs on across tiles: the copier fills the next tile's first stages while
  // the multipliers are still in the epilogue of the current one.
  if (wg == 0) {
    release_registers<40>();
    if (threadIdx.x == 0) {
      int it = 0;  // k-blocks issued so far, over all tiles
      for (int tile = static_cast<int>(blockIdx.x); tile < num_tiles;
           tile += static_cast<int>(gridDim.x)) {
        const int m0 = (tile / n_tiles) * kBM, n0 = (tile % n_tiles) * kBN;
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbarrier_wait(empty + 8 * s, ((it / kStages) - 1) & 1);
          mbarrier_arrive_expect_tx(full + 8 * s, kABytes + kWBytes);
          tma_load_2d(s_a + s * kABytes, &map_a, kb * kBK, m0, full + 8 * s);
          tma_load_2d(s_w + s * kWBytes, &map_w, kb * kBK, n0, full + 8 * s);
        }
      }
    }
    return;
  }

  claim_registers<232>();
  const int c = wg - 1;  // rows 64c .. 64c + 63 of each tile
  const int warp = (static_cast<int>(threadIdx.x) / 32) % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int t = lane % 4;
  const bool storer = threadIdx.x == 128;  // issues the output tile's TMA stores
  float acc[kBN / 2];
  int it = 0;  // k-blocks consumed so far, over all tiles
  for (int tile = static_cast<int>(blockIdx.x); tile < num_tiles;
       tile += static_cast<int>(gridDim.x)) {
    const int tile_n = tile % n_tiles;
    const int m0 = (tile / n_tiles) * kBM;
    for (int kb = 0; kb < k_blocks; ++kb, ++it) {
      const int s = it % kStages;
      mbarrier_wait(full + 8 * s, (it / kStages) & 1);
      const uint32_t a_tile = s_a + s * kABytes + c * (64 * 128);
      const uint32_t w_tile = s_w + s * kWBytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)
        wgmma_m64n256k16_ss(acc, smem_desc_sw128(a_tile + kk * 32),
                            smem_desc_sw128(w_tile + kk * 32), (kb | kk) != 0);
      wgmma_commit();
      wgmma_wait<1>();  // the previous k-block's products have read their stage
      if (kb > 0) {
        __syncwarp();
        if (lane == 0) mbarrier_arrive(empty + 8 * ((it - 1) % kStages));
      }
    }
    // The epilogue's bias pairs (columns 8j + 2t of the tile), loaded while
    // the last k-block's products run. Not earlier: every wgmma_fence of the
    // main loop would wait for loads still in flight (one load a pair;
    // bias_len is a multiple of 8).
    uint32_t bias_pairs[kBN / 8];
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int64_t n = static_cast<int64_t>(tile_n) * kBN + 8 * j + 2 * t;
      bias_pairs[j] = bias && n < bias_len ? ld_global_nc_u32(bias + n) : 0u;
    }
    wgmma_wait<0>();
    fence_registers(acc);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty + 8 * ((it - 1) % kStages));  // the tile's last stage

    // The previous tile's stores must have read the staging boxes.
    if (storer) bulk_wait_read<0>();
    sync_multipliers();
    // acc[4j + {0,1}]: row 16 warp + lane/4, columns 8j + 2(lane%4) + {0,1};
    // acc[4j + {2,3}]: the same columns, 8 rows further.
    const int row0 = 64 * c + 16 * warp + lane / 4;  // in the tile
    // Staging: a 128 x 64 box per 64 columns, 128-byte swizzled as TMA stores
    // it (16-byte chunk c of row r at chunk c ^ (r % 8)). Column pair 8j + 2t
    // is chunk j % 8 of box j / 8; a warp's lanes (8 rows x 4 pairs of one
    // chunk) write 32 different banks.
    const uint32_t row_base = s_out + static_cast<uint32_t>(row0) * 128 + 4 * t;
    const int r7 = lane / 4;  // row0 % 8, the same 8 rows further
    if constexpr (kFused == Fused::Bias) {
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const float2 b = unpack_bf16x2(bias_pairs[j]);
        const uint32_t addr = row_base + (j / 8) * kSubTileBytes + (((j & 7) ^ r7) << 4);
        st_shared_u32(addr, pack_bf16(acc[4 * j] + b.x, acc[4 * j + 1] + b.y));
        st_shared_u32(addr + 8 * 128, pack_bf16(acc[4 * j + 2] + b.x, acc[4 * j + 3] + b.y));
      }
    } else {
      // Tile columns 0..127 are gate rows of features 128 tile_n .. + 127, and
      // 128..255 the up rows of the same features (block_gate_up_rows). As the
      // bf16 module computes it: gate and up rounded, silu(gate) rounded, then
      // the product.
#pragma unroll
      for (int j = 0; j < kBN / 16; ++j) {
        const float2 bg = unpack_bf16x2(bias_pairs[j]);
        const float2 bu = unpack_bf16x2(bias_pairs[j + kBN / 16]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float y[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float g = round_bf16(acc[4 * j + 2 * h + e] + (e ? bg.y : bg.x));
            const float u = round_bf16(acc[4 * (j + kBN / 16) + 2 * h + e] + (e ? bu.y : bu.x));
            y[e] = round_bf16(__fdividef(g, 1.0f + __expf(-g))) * u;
          }
          st_shared_u32(row_base + (j / 8) * kSubTileBytes + (((j & 7) ^ r7) << 4) + h * 8 * 128,
                        pack_bf16(y[0], y[1]));
        }
      }
    }
    // Generic-proxy writes, read by the TMA unit: fence, then one thread stores
    // the boxes (rows and columns outside the output are clipped by the map).
    fence_async_shared();
    sync_multipliers();
    if (storer) {
      constexpr int kOutCols = kFused == Fused::Bias ? kBN : kBN / 2;
#pragma unroll
      for (int box = 0; box < out_boxes<kFused>(); ++box)
        tma_store_2d(&map_out, s_out + box * kSubTileBytes, tile_n * kOutCols + box * 64, m0);
      bulk_commit();
    }
  }                            // tiles
  if (storer) bulk_wait<0>();  // the last stores complete before the block leaves
#else
  (void)map_a, (void)map_w, (void)map_out, (void)bias, (void)bias_len, (void)k_blocks,
      (void)n_tiles, (void)num_tiles;
  __trap();
#endif
}

// cuTensorMapEncodeTiled from the driver, found through the runtime (no link
// against libcuda); null when the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      p = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A row-major bf16 matrix of rows x cols (row stride ld elements), moved in
// boxes of box_rows x 64 columns, 128-byte swizzled; boxes read zeros outside
// the matrix, and stores into it are clipped to it.
int encode_rows(CUtensorMap* map, const bf16* data, int64_t rows, int64_t cols, int64_t ld,
                int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  ENCODER_KIT_REQUIRE(encode != nullptr);
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * sizeof(bf16)};
  const cuuint32_t box[2] = {kBK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult status =
      encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(data), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  ENCODER_KIT_REQUIRE(status == CUDA_SUCCESS);
  return 0;
}

// out[rows x cols] (row stride ld_out) from A[rows x k] and W[w_rows x k].
template <Fused kFused>
int launch(const bf16* a, const bf16* w, int64_t w_rows, const bf16* bias, bf16* out, int64_t rows,
           int64_t k, int64_t cols, int64_t ld_out, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(detail::sm90_gemm_supported());
  ENCODER_KIT_REQUIRE(rows <= int64_t{0x7fffffff} && w_rows <= int64_t{0x7fffffff});
  const int64_t m_tiles = (rows + kBM - 1) / kBM;
  const int64_t n_tiles = (w_rows + kBN - 1) / kBN;
  const int64_t num_tiles = m_tiles * n_tiles;
  ENCODER_KIT_REQUIRE(num_tiles <= int64_t{0x7fffffff});
  CUtensorMap map_a{}, map_w{}, map_out{};
  if (const int err = encode_rows(&map_a, a, rows, k, k, kBM)) return err;
  if (const int err = encode_rows(&map_w, w, w_rows, k, k, kBN)) return err;
  if (const int err = encode_rows(&map_out, out, rows, cols, ld_out, kBM)) return err;
  auto* kernel = gemm_sm90_kernel<kFused>;
  constexpr size_t kSmem = smem_bytes<kFused>();
  if (const int err = detail::opt_in_dynamic_smem(kernel, kSmem)) return err;
  int device = 0, sms = 0;
  ENCODER_KIT_CUDA_TRY(cudaGetDevice(&device));
  ENCODER_KIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int k_blocks = static_cast<int>((k + kBK - 1) / kBK);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(num_tiles, sms));
  return detail::launch_kernel(kernel, dim3(grid), dim3(384), kSmem, stream, map_a, map_w, map_out,
                               bias, w_rows, k_blocks, static_cast<int>(n_tiles),
                               static_cast<int>(num_tiles));
}

// The rules both entries share: TMA wants 16-byte aligned rows and bases; the
// bias is read in pairs.
bool operands_ok(const bf16* a, const bf16* w, const bf16* bias, const bf16* out, int64_t k,
                 int64_t ld_out) {
  return a != nullptr && w != nullptr && out != nullptr &&
         reinterpret_cast<uintptr_t>(bias) % 4 == 0 && detail::aligned16(a) &&
         detail::aligned16(w) && detail::aligned16(out) && k > 0 && k % 8 == 0 &&
         k <= int64_t{0x7fffffff} && ld_out % 8 == 0;
}

}  // namespace

namespace detail {

bool sm90_gemm_supported() {
  return sm90_attention_supported() && tensor_map_encoder() != nullptr;
}

int gemm_bias_sm90_bf16(const bf16* a, const bf16* w, const bf16* bias, bf16* c, int64_t rows,
                        int64_t n, int64_t k, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && n > 0 && n % 8 == 0);
  ENCODER_KIT_REQUIRE(operands_ok(a, w, bias, c, k, n));
  if (rows == 0) return 0;
  return launch<Fused::Bias>(a, w, n, bias, c, rows, k, n, n, stream);
}

}  // namespace detail

int64_t gate_up_blocked_rows(int64_t inter) {
  return inter <= 0 ? 0 : 2 * kGateUpBlock * ((inter + kGateUpBlock - 1) / kGateUpBlock);
}

bool gate_up_silu_mul_supported() {
  return detail::sm90_gemm_supported();
}

int gate_up_silu_mul_bf16(const bf16* x, const bf16* w_blocked, const bf16* b_blocked, bf16* y,
                          int64_t rows, int64_t k, int64_t inter, int64_t ld_y,
                          cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && inter > 0 && inter % 8 == 0 && ld_y >= inter);
  ENCODER_KIT_REQUIRE(b_blocked != nullptr);
  ENCODER_KIT_REQUIRE(operands_ok(x, w_blocked, b_blocked, y, k, ld_y));
  if (rows == 0) return 0;
  return launch<Fused::SiluMul>(x, w_blocked, gate_up_blocked_rows(inter), b_blocked, y, rows, k,
                                inter, ld_y, stream);
}

}  // namespace encoder_kit::cuda
