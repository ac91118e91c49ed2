"""Story metrics shared by evaluation and GRPO rewards: one implementation per metric.

Each metric is cheap per story once its reference-side object is built (`UnigramReference`,
`CosineNovelty`, `VolumeGain`), so the same code serves a 100-prompt evaluation and a reward
called on every rollout.
"""

from eval.metrics.homogenization import draft_to_final_similarity, mean_pairwise_similarity
from eval.metrics.kl import UnigramReference, unigram_kl
from eval.metrics.novelty_cos import CosineNovelty, cosine_novelty
from eval.metrics.volume_gain import VolumeGain, naive_volume_gain

__all__ = [
    "CosineNovelty",
    "UnigramReference",
    "VolumeGain",
    "cosine_novelty",
    "draft_to_final_similarity",
    "mean_pairwise_similarity",
    "naive_volume_gain",
    "unigram_kl",
]
