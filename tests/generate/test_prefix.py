"""Greedy decoding with shared prefixes encoded once: grouping logic, and the same judge scores
as plain `generate()` on the real model (up to float noise)."""

from __future__ import annotations

import pytest
import torch

from generate.backends.prefix import greedy_with_prefix, shared_prefix_groups


def test_prompts_group_by_their_long_common_prefix():
    a = list(range(100))
    b = list(range(50)) + [999] * 60  # shares only the first 50 tokens with the a-prompts
    prompts = [a + [1, 2], b + [5], a + [3], b + [6, 7], [7] * 10]
    groups = {tuple(sorted(g.members)): len(g.prefix) for g in shared_prefix_groups(prompts, min_shared=8)}
    # a-prompts share 100 tokens, b-prompts 110; the half-shared opening does not merge them.
    assert groups == {(0, 2): 100, (1, 3): 110, (4,): 0}


def test_a_prefix_always_leaves_each_member_a_token_of_its_own():
    same = list(range(40))
    groups = shared_prefix_groups([same, same, same + [1]], min_shared=8)
    assert [len(g.prefix) for g in groups] == [39]


@pytest.mark.slow
def test_judge_scores_with_shared_prefixes_equal_plain_generate():
    from eval.judge import Judge
    from generate.backends import Model
    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf import HFBackend

    stories = ["The comet sang of drowned colonists.", "Rust bloomed on the orbital garden.",
               "A keeper lit the lamp as the moon turned.", ""]
    scores = {}
    for engine in ("generate", "fast"):
        backend = HFBackend(str(smollm2_dir()), batch_size=16, dtype="float32", engine=engine)
        scores[engine] = [j.scores for j in Judge(Model(backend), mode="logprob").score(stories, desc=None)]
    for plain, shared in zip(scores["generate"], scores["fast"]):
        assert plain.keys() == shared.keys()
        for aspect in plain:
            assert (plain[aspect] is None) == (shared[aspect] is None)
            if plain[aspect] is not None:
                assert shared[aspect] == pytest.approx(plain[aspect], abs=1e-4)


@pytest.mark.slow
def test_a_stored_prefix_is_encoded_once_across_calls_with_the_same_scores():
    """The judge's rubric prefixes come back at every call (every GRPO step): with a store the
    second call reuses them, and its tokens and log-probabilities are those of the first."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from generate.backends.decode import PrefixStore
    from generate.backends.embedded import smollm2_dir

    tok = AutoTokenizer.from_pretrained(smollm2_dir())
    lm = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()
    rubric = "Rate the story below for its science, from 0 to 5, and explain nothing. " * 8
    prompts = [tok(rubric + f"Story {i}: a probe wakes up on a comet. Score:", add_special_tokens=False)["input_ids"]
               for i in range(3)]
    store = PrefixStore()
    first = greedy_with_prefix(lm, prompts, 2, tok.eos_token_id, {tok.eos_token_id}, 8, store=store)
    assert store.hits == 0 and len(store.entries) == 1
    second = greedy_with_prefix(lm, prompts, 2, tok.eos_token_id, {tok.eos_token_id}, 8, store=store)
    assert store.hits == 1
    for (t1, d1), (t2, d2) in zip(first, second):
        assert t1 == t2
        assert max(float((a - b).abs().max()) for a, b in zip(d1, d2)) < 1e-4
