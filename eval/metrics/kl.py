"""Lexical divergence: KL(p_story || q_reference) between unigram word distributions.

p is the story's empirical unigram distribution; q is the reference's, with additive (Lidstone)
smoothing over the union vocabulary V (reference words plus the story's new words), as the paper
does to avoid zero probabilities:

    p(x) = c_story(x) / n_story
    q(x) = (c_ref(x) + alpha) / (n_ref + alpha |V|)
    KL   = sum over the story's words x of p(x) log(p(x) / q(x))      (nats)

Only q needs smoothing: words absent from the story have p(x) = 0 and contribute nothing, while a
story word absent from the reference would otherwise divide by zero. We deliberately do not smooth
p as well: with a ~70k-word reference vocabulary, smoothing a ~300-word story's p puts almost all
of its mass on words it never uses, and every story then scores about the same (measured on our
150-work corpus: 2.60 vs 2.61 nats for a plain and a rare-word story at alpha = 1). The per-story
cost is O(story words), cheap enough for a training reward.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

from eval.text import word_tokens


class UnigramReference:
    """Reference unigram counts and totals, built once per corpus.

    Args:
        counts: Word -> count over the reference corpus (e.g. `ReferenceCorpus.counts`), with
            words tokenized by `eval.text.word_tokens`.
    """

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = dict(counts)
        self.total = sum(self.counts.values())
        self.vocab_size = len(self.counts)


def unigram_kl(story_text: str, ref_counts: UnigramReference | Mapping[str, int], alpha: float = 1.0) -> float:
    """KL divergence (nats) of the story's unigram distribution from the smoothed reference's.

    Args:
        story_text: The story.
        ref_counts: A prebuilt `UnigramReference` (use this in loops) or raw reference counts.
        alpha: Additive smoothing constant of the reference distribution, > 0.

    Returns:
        KL(p_story || q_ref); larger means lexically further from the reference.

    Raises:
        ValueError: alpha <= 0, or the story has no words (its distribution is undefined).
    """
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    ref = ref_counts if isinstance(ref_counts, UnigramReference) else UnigramReference(ref_counts)
    story = Counter(word_tokens(story_text))
    if not story:
        raise ValueError("story has no words")
    n_story = sum(story.values())
    vocab = ref.vocab_size + sum(1 for w in story if w not in ref.counts)
    log_z_ref = math.log(ref.total + alpha * vocab)
    terms = []
    for word, count in story.items():
        log_p = math.log(count / n_story)
        log_q = math.log(ref.counts.get(word, 0) + alpha) - log_z_ref
        terms.append(count / n_story * (log_p - log_q))
    return math.fsum(terms)
