// PTX helpers shared by the attention kernels (the kit's attention.cu and
// attention_sm90_tma.cu, DeepSeek-OCR-2's SAM attention): cp.async copies,
// ldmatrix, mma.sync, packing and rounding to bf16, the SFU exponential, the
// reductions over the four lanes that share an accumulator row, and the
// staged store of a warp's output rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace encoder_kit::cuda::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; with valid == false nothing is read and the
// destination is zero-filled (rows past the sequence, padded columns).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Two bf16 packed in 32 bits (the lower address in the low half) as floats.
__device__ __forceinline__ float2 unpack_bf16x2(uint32_t v) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}

// x rounded to bf16 and back: where a bf16 module stores an intermediate.
__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

// 2^x on the SFU; 2^-inf = 0, which masks dropped keys.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Max and sum over the four lanes of a quad (lane / 4 equal): the threads
// that hold one row of an mma.sync or wgmma accumulator.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// A warp's 16 query rows of an attention (mma.sync's accumulator layout,
// which each warp of a wgmma m64nN accumulator shares), out: O normalised by the
// rows' full sums (row_sum: this thread's rows g and g + 8, quad-partial),
// staged as bf16 in the warp's own 16 rows of `stage` (kStride elements apart;
// no other warp may read them until the warp is done), then written as whole
// 16-byte chunks: valid_chunks of each row r with row_lo <= first_row + r <
// len, to out_rows + (first_row + r) * out_stride.
template <int kDTiles, int kStride>
__device__ __forceinline__ void store_warp_rows(const float (&o)[kDTiles][4],
                                                const float (&row_sum)[2], __nv_bfloat16* stage,
                                                int lane, int first_row, int len, int valid_chunks,
                                                __nv_bfloat16* out_rows, int64_t out_stride,
                                                int row_lo = 0) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) inv[r] = 1.0f / quad_sum(row_sum[r]);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < kDTiles; ++j) {
    *reinterpret_cast<__nv_bfloat162*>(stage + g * kStride + j * 8 + 2 * t) =
        __floats2bfloat162_rn(o[j][0] * inv[0], o[j][1] * inv[0]);
    *reinterpret_cast<__nv_bfloat162*>(stage + (g + 8) * kStride + j * 8 + 2 * t) =
        __floats2bfloat162_rn(o[j][2] * inv[1], o[j][3] * inv[1]);
  }
  __syncwarp();
  for (int i = lane; i < 16 * valid_chunks; i += 32) {
    const int r = i / valid_chunks;
    const int c = i - r * valid_chunks;
    const int row = first_row + r;
    if (row < len && row >= row_lo)
      *reinterpret_cast<uint4*>(out_rows + static_cast<int64_t>(row) * out_stride + c * 8) =
          *reinterpret_cast<const uint4*>(stage + r * kStride + c * 8);
  }
}

}  // namespace encoder_kit::cuda::ptx
