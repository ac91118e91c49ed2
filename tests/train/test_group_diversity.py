"""group_diversity on literal completions: ranking, trl-style grouping, the multi-process slice."""

from __future__ import annotations

import numpy as np
import pytest

from eval.metrics import mean_pairwise_similarity
from eval.metrics.story import Chunks
from rewards import diversity
from rewards.diversity import group_diversity, sibling_dissimilarity
from tests.train.conftest import chat

PROMPT_A = [{"role": "user", "content": "Write about a comet."}]
PROMPT_B = [{"role": "user", "content": "Write about a lighthouse."}]


def test_identical_siblings_rank_below_different_ones(fake_embedder, context):
    # trl repeats each prompt num_generations times in a row (RepeatSampler mini_repeat_count).
    prompts = [PROMPT_A] * 4 + [PROMPT_B] * 4
    completions = [chat("the same story")] * 4 + [chat(f"story number {i}") for i in range(4)]
    out = group_diversity(prompts, completions, context=context)
    assert out[:4] == pytest.approx([0.0] * 4, abs=1e-6)
    assert min(out[4:]) > 0.1


def test_a_copy_of_a_sibling_scores_lower_than_an_original():
    e = np.eye(3)
    vectors = [e[0], e[0], e[1], e[2]]  # items 0 and 1 are copies
    out = sibling_dissimilarity(["g"] * 4, vectors)
    assert out[0] == pytest.approx(2 / 3) and out[1] == pytest.approx(2 / 3)
    assert out[2] == pytest.approx(1.0) and out[3] == pytest.approx(1.0)


def test_grouping_follows_prompt_id_not_position(fake_embedder, context):
    # Interleaved rows: position-based grouping (rows 0-3, 4-7) would mix the two groups.
    ids = ["a", "b"] * 4
    prompts = [PROMPT_A] * 8  # identical rendered prompts: only the id column tells groups apart
    completions = [chat("same" if k == "a" else f"different {i}") for i, k in enumerate(ids)]
    out = group_diversity(prompts, completions, prompt_id=ids, context=context)
    assert [out[i] for i in range(0, 8, 2)] == pytest.approx([0.0] * 4, abs=1e-6)
    assert min(out[i] for i in range(1, 8, 2)) > 0.1


def test_without_prompt_id_the_prompt_itself_is_the_group(fake_embedder, context):
    prompts = [PROMPT_A, PROMPT_B] * 2
    completions = [chat("same"), chat("x"), chat("same"), chat("y")]
    out = group_diversity(prompts, completions, context=context)
    assert out[0] == pytest.approx(0.0, abs=1e-6) and out[2] == pytest.approx(0.0, abs=1e-6)
    assert out[1] > 0.1 and out[3] > 0.1


def test_an_empty_story_gets_the_floor_and_a_lonely_completion_none(fake_embedder, context):
    """An empty story is information (the floor, 0.0, as the novelty rewards give it), not a failed
    call the trainer would fill with its group's mean; a completion without siblings has no value."""
    out = group_diversity([PROMPT_A] * 3 + [PROMPT_B], [chat("a"), chat(""), chat("b"), chat("alone")], context=context)
    assert out[1] == 0.0 and out[3] is None
    assert out[0] is not None and out[2] is not None
    alone = group_diversity([PROMPT_A] * 2, [chat("a"), chat("b")], context=context)
    assert out[0] == alone[0]  # the empty story is left out of its siblings' group


def test_group_mean_is_one_minus_the_homogenization_metric(fake_embedder, context):
    texts = [f"tale {i}" for i in range(5)]
    out = group_diversity([PROMPT_A] * 5, [chat(t) for t in texts], context=context)
    vectors = fake_embedder.encode(texts)
    assert np.mean(out) == pytest.approx(1 - mean_pairwise_similarity(vectors), abs=1e-6)


def test_a_group_split_across_processes_is_scored_whole(fake_embedder, context, monkeypatch):
    """2 processes x 2 completions of one 4-completion group: each rank must see all 4 siblings."""
    ids = ["g"] * 4
    completions = [chat(t) for t in ("same", "same", "other", "more")]
    whole = group_diversity([PROMPT_A] * 4, completions, prompt_id=ids, context=context)
    vectors = fake_embedder.encode(["same", "same", "other", "more"])

    def gathered_as_rank_1(keys, local_vectors):  # what the all-gather returns on rank 1
        return ids, list(vectors), 2

    monkeypatch.setattr(diversity, "gather_across_processes", gathered_as_rank_1)
    local = group_diversity([PROMPT_A] * 2, completions[2:], prompt_id=ids[2:], context=context)
    assert local == pytest.approx(whole[2:])


def test_single_process_gather_is_the_identity():
    from rewards.groups import gather_across_processes

    keys, vectors = ["a", "b"], [np.ones(2), None]
    assert gather_across_processes(keys, vectors) == (keys, vectors, 0)


def test_a_multi_chunk_story_is_one_unit_vector_so_its_copy_is_no_different():
    """A story of two orthogonal chunks is the unit vector between them; its mean is not (norm
    1/sqrt 2), and 1 - dot of such means would score an exact copy 0.5 apart."""
    vector = Chunks(np.array([[1.0, 0.0], [0.0, 1.0]])).story_vector
    np.testing.assert_allclose(vector, [2 ** -0.5, 2 ** -0.5])
    other = Chunks(np.array([[1.0, 0.0]])).story_vector
    out = sibling_dissimilarity(["p"] * 3, [vector, vector, other])
    assert out == pytest.approx([(1 - 2 ** -0.5) / 2, (1 - 2 ** -0.5) / 2, 1 - 2 ** -0.5])
