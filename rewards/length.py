"""Length penalty: stories should stay near the ~300-word target every framework is asked for.

Without it, novelty rewards can be gamed by length (more chunks, more rare words) and judges are
known to favour longer texts. Words are counted with the metrics' tokenizer (`eval.text`), so
"300 words" means the same thing in training and evaluation.
"""

from __future__ import annotations

from eval.text import word_tokens
from generate.common.ranges import AT_LEAST_1, HELD_OUT, in_range
from rewards.registry import check_values, reward
from rewards.text import completion_texts


def length_penalty(words: int, target_words: int, tolerance: float) -> float:
    """0 within `target * (1 ± tolerance)`, then linear down to -1 at 0 words or 2x the target."""
    relative = abs(words - target_words) / target_words
    return -min(1.0, max(0.0, relative - tolerance) / (1.0 - tolerance))


# The penalty is defined for a target of at least one word and a tolerance in [0, 1).
@reward("length", options={"target_words": in_range(AT_LEAST_1), "tolerance": in_range(HELD_OUT)})
def length(prompts, completions, *, target_words: int = 300, tolerance: float = 0.15, **columns) -> list[float]:
    """Penalty in [-1, 0] for straying from `target_words` by more than `tolerance` (a fraction)."""
    check_values("length", target_words=target_words, tolerance=tolerance)
    return [length_penalty(len(word_tokens(text)), target_words, tolerance) for text in completion_texts(completions)]
