"""Group diversity (DARLING-like): how different a completion is from its siblings.

GRPO samples `num_generations` completions per prompt and compares them with each other; a reward
that only scores quality lets the group collapse onto one safe story. DARLING (arXiv 2509.02534)
rewards each rollout by the fraction of its siblings that are semantically different; we use the
continuous version, the mean cosine dissimilarity to the siblings:

    diversity_i = mean_{j in group(i), j != i} (1 - cos(e_i, e_j))

so identical siblings score 0 and a story's score rises with its distance from every sibling.
Averaged over a group it equals 1 - `eval.metrics.mean_pairwise_similarity`, the evaluation's
homogenization metric, on the same story vectors (`eval.metrics.story.Chunks.story_vector`).

Grouping under trl's batching: trl 1.16's `RepeatSampler` repeats each prompt `num_generations`
times consecutively, and each process receives a contiguous slice of the global generation batch;
the reward functions see only that local slice. Only the global generation batch must be a
multiple of `num_generations`, so with several processes a group CAN be split across them (e.g.
2 processes x 2 completions, 4 generations). We therefore group by the `prompt_id` column (never
by position) and, when there are several processes, all-gather (group key, embedding) pairs so
that every completion is compared with all its siblings, then return this process's slice (trl
slices the gathered rewards the same way: process index x local batch size).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from eval.embed import DEFAULT_EMBEDDER, check_embedder
from eval.metrics.story import DEFAULT_CHUNK_SIZE
from generate.common.ranges import AT_LEAST_1, checked, in_range
from rewards.context import RewardContext
from rewards.groups import gather_across_processes, group_keys
from rewards.registry import reward
from rewards.text import completion_texts, floored


def sibling_dissimilarity(keys: list[str], vectors: list[np.ndarray | None]) -> list[float | None]:
    """Per item, the mean (1 - cosine) to the other items with the same key.

    Items without a vector (empty stories, failed embeddings) are left out of every group and scored
    None, as is an item without siblings; the reward gives an empty story its floor.
    """
    groups: dict[str, list[int]] = defaultdict(list)
    for i, (key, vec) in enumerate(zip(keys, vectors, strict=True)):
        if vec is not None:
            groups[key].append(i)
    out: list[float | None] = [None] * len(keys)
    for members in groups.values():
        if len(members) < 2:
            continue
        mat = np.stack([vectors[i] for i in members]).astype(np.float64)
        sims = mat @ mat.T
        dissim = (1.0 - sims).sum(axis=1) / (len(members) - 1)  # the diagonal term is 1 - 1 = 0
        for i, value in zip(members, dissim.tolist()):
            out[i] = value
    return out


@reward("group_diversity", novelty=True,
        options={"embedder": checked(check_embedder), "chunk_size": in_range(AT_LEAST_1)})
def group_diversity(prompts, completions, *, context: RewardContext, embedder: str = DEFAULT_EMBEDDER,
                    chunk_size: int = DEFAULT_CHUNK_SIZE, **columns) -> list[float | None]:
    """Mean cosine dissimilarity of each completion to its siblings (same `prompt_id`), in [0, 2].

    An empty completion gets 0.0, the floor (`rewards.text.floored`: information, not a failed call);
    one whose embedding failed, or without a sibling to differ from, None."""
    keys = group_keys(prompts, columns.get("prompt_id"))
    chunks = context.chunks(completion_texts(completions), embedder, chunk_size)
    all_keys, all_vectors, offset = gather_across_processes(keys, [c.story_vector for c in chunks])
    values = sibling_dissimilarity(all_keys, all_vectors)[offset:offset + len(keys)]
    return [floored(v, c.reason) for v, c in zip(values, chunks, strict=True)]
