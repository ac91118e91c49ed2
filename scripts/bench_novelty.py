"""Benchmark the reference-based story metrics on the full reference corpus.

Measures what a GRPO reward pays per story: the volume gain computed by `VolumeGain` (reference
factored once, O(d^2 k) per story) against `naive_volume_gain` (two covariance log-determinants
over the whole ~28k x d reference per story), and checks that both agree. Cosine novelty and
unigram KL are timed too. Stories are synthetic ~500-word texts (2 or more chunks, cut by the
encoder's tokens as every story is) drawn from the reference unigram distribution and embedded
with the real encoder.

The first run embeds the corpus (minutes on a CPU); later runs reuse the on-disk cache.

Judge throughput (stories per minute) is measured too, in `logprob` mode (one greedy pass) and
in `sample` mode (K sampled replies, one pass without re-asks), with the same judge model on a
few short synthetic stories; `--judge-stories 0` skips it.

Usage:
    python -m scripts.bench_novelty [--reference-dir DIR] [--stories 5] [--reps 3] [--judge SPEC]

The last line printed is always `volume_gain speedup: <ratio>x`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.corpus.resolve import reference_dir
from eval.embed import DEFAULT_EMBEDDER, Embedder
from eval.judge_throughput import measure_judge_throughput
from eval.metrics import CosineNovelty, UnigramReference, VolumeGain, naive_volume_gain, unigram_kl
from eval.reference import ReferenceCorpus, ReferenceUnavailable
from generate.backends import load_model
from generate.common.cli import run_cli
from generate.common.errors import UsageError

_DEFAULT_REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifi-reference" / "texts"


@dataclass(frozen=True)
class VolumeGainTiming:
    """Volume-gain timings in milliseconds and the fast/naive agreement."""

    setup_ms: float
    fast_ms: float
    batched_ms: float
    naive_ms: float
    max_rel_diff: float

    @property
    def speedup(self) -> float:
        """Naive time over fast time, per story."""
        return self.naive_ms / self.fast_ms

    def lines(self) -> list[str]:
        """Report lines, without the final speedup line."""
        return [
            f"volume_gain setup (eigendecomposition, once): {self.setup_ms:.1f} ms",
            f"volume_gain per story fast: {self.fast_ms:.3f} ms",
            f"volume_gain per story fast, batched: {self.batched_ms:.3f} ms",
            f"volume_gain per story naive: {self.naive_ms:.1f} ms",
            f"volume_gain max relative difference fast vs naive: {self.max_rel_diff:.2e}",
        ]


def _per_call_ms(fn: Callable[[], object], reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) * 1000 / reps


def synthetic_stories(counts: dict[str, int], n: int, words: int, seed: int) -> list[str]:
    """Texts of `words` words sampled from the reference unigram distribution."""
    rng = np.random.default_rng(seed)
    vocab = np.array(list(counts))
    probs = np.array(list(counts.values()), dtype=np.float64)
    probs /= probs.sum()
    return [" ".join(rng.choice(vocab, size=words, p=probs)) for _ in range(n)]


def bench_volume_gain(ref: np.ndarray, stories: Sequence[np.ndarray], reps: int) -> VolumeGainTiming:
    """Time `VolumeGain` (single and batched) against `naive_volume_gain` on the same stories."""
    start = time.perf_counter()
    gain = VolumeGain(ref)
    setup_ms = (time.perf_counter() - start) * 1000
    fast_ms = _per_call_ms(lambda: [gain(s) for s in stories], reps) / len(stories)
    batched_ms = _per_call_ms(lambda: gain.batch(stories), reps) / len(stories)
    naive_ms = _per_call_ms(lambda: [naive_volume_gain(ref, s) for s in stories], reps) / len(stories)
    fast = gain.batch(stories)
    naive = np.array([naive_volume_gain(ref, s) for s in stories])
    max_rel_diff = float(np.max(np.abs(fast - naive) / np.abs(naive)))
    return VolumeGainTiming(setup_ms, fast_ms, batched_ms, naive_ms, max_rel_diff)


def bench_cheap_metrics(
    corpus: ReferenceCorpus, texts: Sequence[str], stories: Sequence[np.ndarray], reps: int
) -> list[str]:
    """Per-story times of cosine novelty and unigram KL, with their one-off setup costs."""
    start = time.perf_counter()
    novelty = CosineNovelty(corpus.embeddings)
    unigrams = UnigramReference(corpus.counts)
    setup_ms = (time.perf_counter() - start) * 1000
    novelty_ms = _per_call_ms(lambda: [novelty(s) for s in stories], reps) / len(stories)
    kl_ms = _per_call_ms(lambda: [unigram_kl(t, unigrams) for t in texts], reps) / len(texts)
    return [
        f"cosine_novelty + unigram_kl setup (once): {setup_ms:.1f} ms",
        f"cosine_novelty per story: {novelty_ms:.3f} ms",
        f"unigram_kl per story: {kl_ms:.3f} ms",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print one line per measurement, the speedup line last."""
    parser = argparse.ArgumentParser(prog="python -m scripts.bench_novelty", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-dir", help="directory of .txt works (default: as every command, else shared/)")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="encoder name (default: %(default)s)")
    parser.add_argument("--max-chunks", type=int, help="embed a seeded sample of this many chunks (quick runs)")
    parser.add_argument("--stories", type=int, default=5, help="synthetic stories to score (default: %(default)s)")
    parser.add_argument("--words", type=int, default=500, help="words per story, ~2 chunks (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=3, help="timing repetitions (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judge", default="smollm2-135m-instruct", help="judge model spec (default: %(default)s)")
    parser.add_argument("--judge-stories", type=int, default=4, help="stories for judge throughput, 0 skips it")
    parser.add_argument("--judge-words", type=int, default=60, help="words per judged story (default: %(default)s)")
    parser.add_argument("--judge-samples", type=int, default=3, help="sample mode's K (default: %(default)s)")
    parser.add_argument("--judge-max-new-tokens", type=int, default=32,
                        help="sample mode's reply budget (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.stories < 1 or args.reps < 1:
        raise UsageError("--stories and --reps must be at least 1")
    if args.judge_stories < 0 or args.judge_samples < 1:
        raise UsageError("--judge-stories must be >= 0 and --judge-samples >= 1")

    directory = reference_dir(args.reference_dir) or _DEFAULT_REFERENCE
    embedder = Embedder(args.embedder)
    try:
        corpus = ReferenceCorpus.load(directory, embedder, max_chunks=args.max_chunks, seed=args.seed)
    except ReferenceUnavailable as exc:
        raise UsageError(f"reference corpus unavailable: {exc}") from None
    texts = synthetic_stories(corpus.counts, args.stories, args.words, args.seed)
    # Cut as every story is, by the encoder's own tokens (`Embedder.chunk`): cut by words alone, a
    # chunk longer than the encoder reads would be truncated, and the timings would be of other inputs.
    stories = [embedder.encode(pieces) for pieces in embedder.chunk(texts, corpus.chunk_size)]
    chunks = sorted({len(s) for s in stories})
    n_chunks, dim = corpus.embeddings.shape
    print(f"reference: {n_chunks} chunks x {dim} dims ({corpus.embedder_name})")
    print(f"stories: {len(stories)} synthetic, {args.words} words, {'/'.join(map(str, chunks))} chunks each")

    for line in bench_cheap_metrics(corpus, texts, stories, args.reps):
        print(line)
    timing = bench_volume_gain(corpus.embeddings, stories, args.reps)
    for line in timing.lines():
        print(line)
    if args.judge_stories:
        judged = synthetic_stories(corpus.counts, args.judge_stories, args.judge_words, args.seed + 1)
        judge = load_model(args.judge)
        for result in measure_judge_throughput(judge, judged, samples=args.judge_samples,
                                               max_new_tokens=args.judge_max_new_tokens, seed=args.seed):
            print(result.line())
    # Further benchmark sections print their lines here, before the speedup line: that one
    # stays last so that scripts can read it with `tail -1`.
    print(f"volume_gain speedup: {timing.speedup:.0f}x")
    return 0


if __name__ == "__main__":
    run_cli(main)
