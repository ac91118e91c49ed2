// Causal attention of a prefill pass (many new tokens per row, after an optional reused past) over a
// bf16 key/value cache, with AVX-512 BF16 dot products (vdpbf16ps: 32 bf16 products summed into 16
// fp32 lanes per instruction). generate/backends/cpu/attention.py builds it and calls it from the
// fused prefill (fused.py) on CPUs that have AVX512_BF16.
//
// Why: the late rounds of Debate and Discussion encode about a thousand new tokens per row after a
// longer reused history, and there PyTorch's CPU flash attention ran at a fraction of the CPU's bf16
// matrix-product speed and took most of the prefill. Its score products have an inner
// dimension of only the head size (64) and go through a general GEMM per block.
//
// Here each (row, key/value head) packs its keys and values once into the layouts vdpbf16ps reads
// (a key block as [dim pair][key] words, a value block as [key pair][dim] words), then tiles of R
// query vectors (the G query heads of consecutive positions) sweep the key blocks of 32 with an
// online softmax: scores for the tile in 2R accumulators, fp32 exp, probabilities rounded to bf16 (as
// SDPA's CPU kernel rounds them before its second product), and the value sums in 4R accumulators
// (head size 64). Accumulation is fp32. Blocks past a tile's causal limit are skipped.
//
// q: (B, S, Hkv, G, D) contiguous (the projection's own layout: no transpose); k, v: (B, Hkv, T, D)
// with T = P + S (P reused past columns) and unit stride on D; mask: (B, T) bool, false for padding
// columns (or an empty tensor: all true). Query position i of a row may attend to key column c when
// c <= P + i and mask[c]. Returns (B, S, Hkv, G, D) bf16. D must be 64.
#include <ATen/Parallel.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "simd.h"

namespace {

constexpr int D = 64;   // head size
constexpr int DP = 32;  // dimension pairs
constexpr int KB = 32;  // keys per block
constexpr int R = 6;    // query vectors per tile

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

inline BF16_TARGET __m512bh as_bh(__m512i x) { return reinterpret_cast<__m512bh>(x); }

// One (row, key/value head): keys packed as [block][dim pair][32 keys] 32-bit words, values as
// [block][key pair][64 dims] words (each word two bf16), zero past T.
void pack(const uint16_t* k, const uint16_t* v, int64_t T, int64_t kst, int64_t vst, uint32_t* kp, uint32_t* vp) {
  const int64_t blocks = (T + KB - 1) / KB;
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t* kb = kp + b * DP * KB;
    uint32_t* vb = vp + b * (KB / 2) * D;
    for (int j = 0; j < KB; ++j) {
      const int64_t t = b * KB + j;
      if (t < T) {
        const uint32_t* row = reinterpret_cast<const uint32_t*>(k + t * kst);
        for (int p = 0; p < DP; ++p) kb[p * KB + j] = row[p];
      } else {
        for (int p = 0; p < DP; ++p) kb[p * KB + j] = 0;
      }
    }
    for (int jp = 0; jp < KB / 2; ++jp) {
      const int64_t t0 = b * KB + 2 * jp, t1 = t0 + 1;
      for (int d = 0; d < D; ++d) {
        const uint32_t lo = t0 < T ? v[t0 * vst + d] : 0, hi = t1 < T ? v[t1 * vst + d] : 0;
        vb[jp * D + d] = lo | (hi << 16);
      }
    }
  }
}

// One tile: nr (<= R) query vectors at positions pos[r], each D bf16 at q[r]; writes out[r].
BF16_TARGET void tile(const uint16_t* const* q, const int64_t* pos, int nr, const uint32_t* kp, const uint32_t* vp,
                      const bool* mask, int64_t T, int64_t P, float scale, uint16_t* const* out) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const uint32_t* qw[R];
  for (int r = 0; r < R; ++r) qw[r] = reinterpret_cast<const uint32_t*>(q[r < nr ? r : nr - 1]);
  int64_t last = 0;  // the last key column any vector of the tile may see
  for (int r = 0; r < nr; ++r) last = std::max(last, std::min(P + pos[r], T - 1));
  float m[R];
  __m512 l[R], acc[R][4];
  for (int r = 0; r < R; ++r) {
    m[r] = ninf;
    l[r] = _mm512_setzero_ps();
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  alignas(64) uint16_t pb[R][KB];
  for (int64_t b = 0; b * KB <= last; ++b) {
    const int64_t t0 = b * KB;
    // Scores: s[r][h] lanes are keys t0 + 16h + lane.
    __m512 s[R][2];
    for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = _mm512_setzero_ps();
    const uint32_t* kb = kp + b * DP * KB;
    for (int p = 0; p < DP; ++p) {
      const __m512bh k0 = as_bh(_mm512_loadu_si512(kb + p * KB));
      const __m512bh k1 = as_bh(_mm512_loadu_si512(kb + p * KB + 16));
      for (int r = 0; r < R; ++r) {
        const __m512bh qq = as_bh(_mm512_set1_epi32(static_cast<int>(qw[r][p])));
        s[r][0] = _mm512_dpbf16_ps(s[r][0], qq, k0);
        s[r][1] = _mm512_dpbf16_ps(s[r][1], qq, k1);
      }
    }
    // Which keys each vector may see: in range, not padding, not after its position.
    __mmask16 valid[2];
    for (int h = 0; h < 2; ++h) {
      const int64_t from = t0 + 16 * h;
      const int n = from >= T ? 0 : (T - from >= 16 ? 16 : int(T - from));
      __mmask16 bits = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      if (mask != nullptr && n > 0) {
        const __m128i mb = _mm_maskz_loadu_epi8(bits, mask + from);
        bits = _mm_test_epi8_mask(mb, mb);
      }
      valid[h] = bits;
    }
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int r = 0; r < nr; ++r) {
      const int64_t lim = P + pos[r];
      __mmask16 live[2] = {valid[0], valid[1]};
      if (t0 + KB - 1 > lim) {  // the block crosses this vector's position: drop the keys after it
        for (int h = 0; h < 2; ++h) {
          const int64_t seen = lim - (t0 + 16 * h) + 1;  // keys of this half at or before the position
          live[h] &= seen <= 0 ? __mmask16(0) : (seen >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << seen) - 1));
        }
      }
      if (!(live[0] | live[1])) {
        std::memset(pb[r], 0, sizeof(pb[r]));
        continue;
      }
      for (int h = 0; h < 2; ++h)
        s[r][h] = _mm512_mask_blend_ps(live[h], _mm512_set1_ps(ninf), _mm512_mul_ps(s[r][h], vscale));
      const float bm = _mm512_reduce_max_ps(_mm512_max_ps(s[r][0], s[r][1]));
      if (bm > m[r]) {  // a new maximum: rescale what was summed so far
        const __m512 c = exp512(_mm512_set1_ps(m[r] - bm));
        l[r] = _mm512_mul_ps(l[r], c);
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_mul_ps(acc[r][j], c);
        m[r] = bm;
      }
      const __m512 top = _mm512_set1_ps(m[r]);
      for (int h = 0; h < 2; ++h) {
        // Rounded to bf16 (nearest even) before both the sum and the value products, so the
        // weights sum to what they multiply.
        const __m256bh e = _mm512_cvtneps_pbh(_mm512_maskz_mov_ps(live[h], exp512(_mm512_sub_ps(s[r][h], top))));
        const __m256i bits = reinterpret_cast<__m256i>(e);
        l[r] = _mm512_add_ps(l[r], _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(pb[r] + 16 * h), bits);
      }
    }
    for (int r = nr; r < R; ++r) std::memset(pb[r], 0, sizeof(pb[r]));
    const uint32_t* vb = vp + b * (KB / 2) * D;
    for (int jp = 0; jp < KB / 2; ++jp) {
      __m512bh vv[4];
      for (int j = 0; j < 4; ++j) vv[j] = as_bh(_mm512_loadu_si512(vb + jp * D + 16 * j));
      for (int r = 0; r < R; ++r) {
        uint32_t w;
        std::memcpy(&w, pb[r] + 2 * jp, 4);
        const __m512bh pp = as_bh(_mm512_set1_epi32(static_cast<int>(w)));
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], pp, vv[j]);
      }
    }
  }
  for (int r = 0; r < nr; ++r) {
    const float total = _mm512_reduce_add_ps(l[r]);
    const __m512 inv = _mm512_set1_ps(total > 0.f ? 1.f / total : 0.f);  // nothing to attend to: zeros
    for (int j = 0; j < 4; ++j)
      store_bf16(reinterpret_cast<at::BFloat16*>(out[r]) + 16 * j, _mm512_mul_ps(acc[r][j], inv));
  }
}

}  // namespace

torch::Tensor prefill_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor mask, double scale) {
  TORCH_CHECK(q.dim() == 5 && q.size(4) == D && q.scalar_type() == at::kBFloat16, "prefill_attention: q (B, S, Hkv, G, 64) bf16");
  TORCH_CHECK(k.scalar_type() == at::kBFloat16 && v.scalar_type() == at::kBFloat16 && k.stride(3) == 1 && v.stride(3) == 1,
              "prefill_attention: k, v bf16 with unit stride on the head dimension");
  auto qc = q.contiguous();
  const int64_t B = q.size(0), S = q.size(1), H = q.size(2), G = q.size(3), T = k.size(2), P = T - S;
  TORCH_CHECK(P >= 0 && k.size(0) == B && k.size(1) == H && v.size(2) == T, "prefill_attention: shapes disagree");
  const bool masked = mask.numel() > 0;
  auto mc = masked ? mask.contiguous() : mask;
  TORCH_CHECK(!masked || (mc.scalar_type() == at::kBool && mc.size(0) == B && mc.size(1) == T), "prefill_attention: mask (B, T) bool");
  auto out = torch::empty_like(qc);
  const int64_t blocks = (T + KB - 1) / KB;
  std::vector<uint32_t> kpack(B * H * blocks * DP * KB), vpack(B * H * blocks * (KB / 2) * D);
  const auto* kd = reinterpret_cast<const uint16_t*>(k.data_ptr<at::BFloat16>());
  const auto* vd = reinterpret_cast<const uint16_t*>(v.data_ptr<at::BFloat16>());
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      pack(kd + b * k.stride(0) + h * k.stride(1), vd + b * v.stride(0) + h * v.stride(1), T, k.stride(2), v.stride(2),
           kpack.data() + bh * blocks * DP * KB, vpack.data() + bh * blocks * (KB / 2) * D);
    }
  });
  const auto* qd = reinterpret_cast<const uint16_t*>(qc.data_ptr<at::BFloat16>());
  auto* od = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
  const bool* md = masked ? mc.data_ptr<bool>() : nullptr;
  const int64_t vectors = S * G, tiles = (vectors + R - 1) / R;  // per (row, head): positions x query heads
  // Later tiles see more keys, and parallel_for gives each thread one contiguous range of tasks:
  // tiles are taken from both ends in turn (0, last, 1, last - 1, ...) so every range is a fair mix.
  at::parallel_for(0, B * H * tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task % (B * H), turn = task / (B * H), b = bh / H, h = bh % H;
      const int64_t t = turn % 2 == 0 ? turn / 2 : tiles - 1 - turn / 2;
      const uint16_t* qs[R];
      uint16_t* os[R];
      int64_t pos[R];
      int nr = 0;
      for (int64_t x = t * R; x < vectors && nr < R; ++x, ++nr) {
        const int64_t i = x / G, g = x % G, off = (((b * S + i) * H + h) * G + g) * D;
        qs[nr] = qd + off;
        os[nr] = od + off;
        pos[nr] = i;
      }
      tile(qs, pos, nr, kpack.data() + bh * blocks * DP * KB, vpack.data() + bh * blocks * (KB / 2) * D,
           md ? md + b * T : nullptr, T, P, static_cast<float>(scale), os);
    }
  });
  return out;
}
