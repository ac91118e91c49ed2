// Attention of one new token per row over a bf16 key/value cache, for the hf backend's decode steps
// on CPU (generate/backends/cpu/attention.py builds and calls it; SDPA does everything else).
//
// Why: PyTorch's CPU SDPA kernel is built for long queries; for one query token per row over a long
// cache it took most of a decode step, reading the keys and values far below the memory's bandwidth.
// Here each (row, key/value head) is one task and one pass over its cache (flash-decoding's online
// softmax): keys come in blocks of 16, each scored against the task's G query heads (bf16 widened to
// fp32, AVX-512 FMAs, the sixteen dot products summed by one transposing tree), the block's
// probabilities are taken with a vectorised exp against the running maximum (what was summed before
// is rescaled when the maximum grows), and the block's value rows are added in while its keys are
// still fresh. Accumulation is fp32, as in SDPA; the result is rounded to bf16. One pass, not two (all
// scores, then all values) with one horizontal sum per key: the two-pass version was slower.
//
// q: (B, Hkv, G, D) contiguous; k, v: (B, Hkv, T, D), unit stride on D (views into a larger cache
// are fine); mask: (B, T) bool, true where a row may attend. D is 64 or 128; G in {1, 2, 3, 4, 6, 8}.
#include <ATen/Parallel.h>
#include <cmath>
#include <limits>

#include "simd.h"

namespace {

// Sixteen vectors to one: lane i is the sum of a[i]'s lanes (a transposing tree of 45 ops, where
// sixteen separate horizontal sums would take ~130 and serialise on their latency).
inline __m512 hsum16(const __m512* a) {
  __m512 x[8], y[4];
  for (int i = 0; i < 8; ++i)
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d l = _mm512_castps_pd(x[2 * i]), h = _mm512_castps_pd(x[2 * i + 1]);
    y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(l, h)), _mm512_castpd_ps(_mm512_unpackhi_pd(l, h)));
  }
  const __m512 u0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xDD));
  const __m512 u1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x88), _mm512_shuffle_f32x4(y[2], y[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x88), _mm512_shuffle_f32x4(u0, u1, 0xDD));
}

template <int G, int DV>
void attend(const at::BFloat16* q, const at::BFloat16* k, const at::BFloat16* v, const bool* mask, at::BFloat16* out,
            int64_t T, int64_t kst, int64_t vst, float scale) {
  constexpr int D = DV * 16;
  __m512 qv[G][DV];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < DV; ++j) qv[g][j] = _mm512_mul_ps(load_bf16(q + g * D + j * 16), _mm512_set1_ps(scale));
  const float ninf = -std::numeric_limits<float>::infinity();
  const __m512 vninf = _mm512_set1_ps(ninf);
  float m[G];
  __m512 l[G], acc[G][DV];
  for (int g = 0; g < G; ++g) {
    m[g] = ninf;
    l[g] = _mm512_setzero_ps();
    for (int j = 0; j < DV; ++j) acc[g][j] = _mm512_setzero_ps();
  }
  alignas(64) float p[G][16];
  for (int64_t t0 = 0; t0 < T; t0 += 16) {
    const int n = T - t0 < 16 ? int(T - t0) : 16;
    __mmask16 live;
    if (n == 16) {
      const __m128i mb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mask + t0));
      live = _mm_test_epi8_mask(mb, mb);
    } else {
      live = 0;
      for (int i = 0; i < n; ++i) live |= __mmask16(mask[t0 + i] ? 1u << i : 0u);
    }
    if (!live) continue;
    __m512 sc[G];
    {
      __m512 dots[G][16];
      for (int i = 0; i < 16; ++i) {
        if (i >= n) { for (int g = 0; g < G; ++g) dots[g][i] = _mm512_setzero_ps(); continue; }
        const at::BFloat16* kr = k + (t0 + i) * kst;
        __m512 kv[DV];
        for (int j = 0; j < DV; ++j) kv[j] = load_bf16(kr + j * 16);
        for (int g = 0; g < G; ++g) {
          __m512 a = _mm512_mul_ps(qv[g][0], kv[0]);
          for (int j = 1; j < DV; ++j) a = _mm512_fmadd_ps(qv[g][j], kv[j], a);
          dots[g][i] = a;
        }
      }
      for (int g = 0; g < G; ++g) sc[g] = _mm512_mask_blend_ps(live, vninf, hsum16(dots[g]));
    }
    for (int g = 0; g < G; ++g) {
      const float bm = _mm512_reduce_max_ps(sc[g]);
      if (bm > m[g]) {  // a new maximum: rescale what was summed so far
        const __m512 c = exp512(_mm512_set1_ps(m[g] - bm));
        l[g] = _mm512_mul_ps(l[g], c);
        for (int j = 0; j < DV; ++j) acc[g][j] = _mm512_mul_ps(acc[g][j], c);
        m[g] = bm;
      }
      const __m512 e = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(sc[g], _mm512_set1_ps(m[g]))));
      l[g] = _mm512_add_ps(l[g], e);
      _mm512_store_ps(p[g], e);
    }
    for (int i = 0; i < n; ++i) {
      if (!((live >> i) & 1)) continue;
      const at::BFloat16* vr = v + (t0 + i) * vst;
      __m512 vv[DV];
      for (int j = 0; j < DV; ++j) vv[j] = load_bf16(vr + j * 16);
      for (int g = 0; g < G; ++g) {
        const __m512 w = _mm512_set1_ps(p[g][i]);
        for (int j = 0; j < DV; ++j) acc[g][j] = _mm512_fmadd_ps(w, vv[j], acc[g][j]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const float total = _mm512_reduce_add_ps(l[g]);
    const float inv = total > 0.f ? 1.f / total : 0.f;  // a row with nothing to attend to gives zeros
    alignas(64) float buf[D];
    for (int j = 0; j < DV; ++j) _mm512_store_ps(buf + j * 16, _mm512_mul_ps(acc[g][j], _mm512_set1_ps(inv)));
    for (int d = 0; d < D; ++d) out[g * D + d] = at::BFloat16(buf[d]);
  }
}

template <int G, int DV>
void run(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& mask,
         torch::Tensor& out, float scale) {
  const int64_t B = q.size(0), H = q.size(1), T = k.size(2);
  const auto* qp = q.data_ptr<at::BFloat16>();
  const auto* kp = k.data_ptr<at::BFloat16>();
  const auto* vp = v.data_ptr<at::BFloat16>();
  const bool* mp = mask.data_ptr<bool>();
  auto* op = out.data_ptr<at::BFloat16>();
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      attend<G, DV>(qp + bh * G * DV * 16, kp + b * k.stride(0) + h * k.stride(1),
                    vp + b * v.stride(0) + h * v.stride(1), mp + b * T, op + bh * G * DV * 16, T, k.stride(2),
                    v.stride(2), scale);
    }
  });
}

}  // namespace

// q: (B, Hkv, G, D) contiguous; k, v: (B, Hkv, T, D) with unit stride on D; mask: (B, T) bool.
torch::Tensor decode_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor mask, double scale) {
  auto qc = q.contiguous();
  auto mc = mask.contiguous();
  auto out = torch::empty_like(qc);
  const int64_t G = q.size(2), D = q.size(3);
#define CASE(g, dv) if (G == g && D == dv * 16) { run<g, dv>(qc, k, v, mc, out, float(scale)); return out; }
  CASE(1, 4) CASE(2, 4) CASE(3, 4) CASE(4, 4) CASE(6, 4) CASE(8, 4)
  CASE(1, 8) CASE(2, 8) CASE(3, 8) CASE(4, 8) CASE(6, 8) CASE(8, 8)
#undef CASE
  TORCH_CHECK(false, "decode_attention: unsupported shape");
}
