// Attention of one new token per row over a bf16 key/value cache, for the hf backend's decode steps
// on CPU (generate/backends/attention.py builds and calls it; SDPA does everything else).
//
// Why: at batch 48 over 1,000 cached tokens, PyTorch's CPU SDPA kernel took ~7 ms per layer, ~60% of
// a decode step, reading the step's keys and values at ~5 GB/s on a machine that streams 39 GB/s.
// Here each (row, key/value head) is one task: its G query heads are scored against each key row
// in one pass (bf16 loads widened to fp32, AVX-512 FMAs), a vectorised exp gives the softmax, and
// a second pass sums the value rows. Accumulation is fp32, as in SDPA; the result is rounded to bf16.
//
// q: (B, Hkv, G, D) contiguous; k, v: (B, Hkv, T, D), unit stride on D (views into a larger cache
// are fine); mask: (B, T) bool, true where a row may attend. D is 64 or 128; G in {1, 2, 3, 4, 6, 8}.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>
#include <limits>
#include <vector>

namespace {

inline __m512 load_bf16(const at::BFloat16* p) {
  __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}

// exp(x) for x <= 0: 2^n * p(r), r = x - n ln2, |r| <= ln2/2; degree-6 polynomial (rel. err ~2e-7).
inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

template <int G, int DV>
void attend(const at::BFloat16* q, const at::BFloat16* k, const at::BFloat16* v, const bool* mask, at::BFloat16* out,
            int64_t T, int64_t kst, int64_t vst, float scale, float* s) {
  constexpr int D = DV * 16;
  __m512 qv[G][DV];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < DV; ++j) qv[g][j] = _mm512_mul_ps(load_bf16(q + g * D + j * 16), _mm512_set1_ps(scale));
  const float ninf = -std::numeric_limits<float>::infinity();
  float mx[G];
  for (int g = 0; g < G; ++g) mx[g] = ninf;
  for (int64_t t = 0; t < T; ++t) {
    if (!mask[t]) { for (int g = 0; g < G; ++g) s[g * T + t] = ninf; continue; }
    __m512 kv[DV];
    for (int j = 0; j < DV; ++j) kv[j] = load_bf16(k + t * kst + j * 16);
    for (int g = 0; g < G; ++g) {
      __m512 acc = _mm512_mul_ps(qv[g][0], kv[0]);
      for (int j = 1; j < DV; ++j) acc = _mm512_fmadd_ps(qv[g][j], kv[j], acc);
      const float dot = _mm512_reduce_add_ps(acc);
      s[g * T + t] = dot;
      mx[g] = dot > mx[g] ? dot : mx[g];
    }
  }
  float inv[G];
  const __m512 vninf = _mm512_set1_ps(ninf);
  for (int g = 0; g < G; ++g) {
    float* sg = s + g * T;
    const __m512 m = _mm512_set1_ps(mx[g]);
    __m512 sum = _mm512_setzero_ps();
    int64_t t = 0;
    for (; t + 16 <= T; t += 16) {
      const __m512 x = _mm512_loadu_ps(sg + t);
      const __m512 e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, vninf, _CMP_NEQ_OQ), exp512(_mm512_sub_ps(x, m)));
      _mm512_storeu_ps(sg + t, e);
      sum = _mm512_add_ps(sum, e);
    }
    float total = _mm512_reduce_add_ps(sum);
    for (; t < T; ++t) { const float e = sg[t] == ninf ? 0.f : std::exp(sg[t] - mx[g]); sg[t] = e; total += e; }
    inv[g] = total > 0.f ? 1.f / total : 0.f;  // a row with nothing to attend to gives zeros
  }
  __m512 acc[G][DV];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < DV; ++j) acc[g][j] = _mm512_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    if (!mask[t]) continue;
    __m512 vv[DV];
    for (int j = 0; j < DV; ++j) vv[j] = load_bf16(v + t * vst + j * 16);
    for (int g = 0; g < G; ++g) {
      const __m512 p = _mm512_set1_ps(s[g * T + t]);
      for (int j = 0; j < DV; ++j) acc[g][j] = _mm512_fmadd_ps(p, vv[j], acc[g][j]);
    }
  }
  for (int g = 0; g < G; ++g) {
    alignas(64) float buf[D];
    for (int j = 0; j < DV; ++j) _mm512_store_ps(buf + j * 16, _mm512_mul_ps(acc[g][j], _mm512_set1_ps(inv[g])));
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
    std::vector<float> s(G * T);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      attend<G, DV>(qp + bh * G * DV * 16, kp + b * k.stride(0) + h * k.stride(1),
                    vp + b * v.stride(0) + h * v.stride(1), mp + b * T, op + bh * G * DV * 16, T, k.stride(2),
                    v.stride(2), scale, s.data());
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

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("decode_attention", &decode_attention); }
