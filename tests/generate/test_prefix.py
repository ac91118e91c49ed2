"""Greedy decoding with shared prefixes encoded once: grouping logic, and the same judge scores
as plain `generate()` on the real model (up to float noise)."""

from __future__ import annotations

import pytest
import torch

from generate.backends.hf.prefix import greedy_with_prefix, shared_prefix_groups


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


@pytest.fixture(scope="module")
def rubric_prompts():
    """(tokenizer, float32 SmolLM2, three prompts sharing a 100-token rubric and differing after)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from generate.backends.embedded import smollm2_dir

    tok = AutoTokenizer.from_pretrained(smollm2_dir())
    lm = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()
    rubric = "Rate the story below for its science, from 0 to 5, and explain nothing. " * 8
    prompts = [tok(rubric + f"Story {i}: a probe wakes up on a comet. Score:", add_special_tokens=False)["input_ids"]
               for i in range(3)]
    return tok, lm, prompts


@pytest.mark.slow
def test_judge_scores_with_shared_prefixes_equal_plain_generate():
    from eval.judge import Judge
    from generate.backends import Model
    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf import HFBackend

    stories = ["The comet sang of drowned colonists.", "Rust bloomed on the orbital garden.",
               "A keeper lit the lamp as the moon turned.", ""]
    scores = {}
    for path in ("generate", "fast"):
        backend = HFBackend(str(smollm2_dir()), batch_size=16, dtype="float32", path=path)
        scores[path] = [j.scores for j in Judge(Model(backend), mode="logprob").score(stories, desc=None)]
    for plain, shared in zip(scores["generate"], scores["fast"]):
        assert plain.keys() == shared.keys()
        for aspect in plain:
            assert (plain[aspect] is None) == (shared[aspect] is None)
            if plain[aspect] is not None:
                assert shared[aspect] == pytest.approx(plain[aspect], abs=1e-4)


@pytest.mark.slow
def test_a_stored_prefix_is_encoded_once_across_calls_with_the_same_scores(rubric_prompts):
    """The judge's rubric prefixes come back at every call (every GRPO step): with a store the
    second call reuses them, and its tokens and log-probabilities are those of the first."""
    from generate.backends.hf.store import PrefixStore

    tok, lm, prompts = rubric_prompts
    store = PrefixStore()
    first = greedy_with_prefix(lm, prompts, 2, tok.eos_token_id, {tok.eos_token_id}, 8, store=store)
    assert store.hits == 0 and len(store.entries) == 1
    second = greedy_with_prefix(lm, prompts, 2, tok.eos_token_id, {tok.eos_token_id}, 8, store=store)
    assert store.hits == 1
    for (t1, d1), (t2, d2) in zip(first, second):
        assert t1 == t2
        assert max(float((a - b).abs().max()) for a, b in zip(d1, d2)) < 1e-4


@pytest.mark.slow
def test_rows_of_groups_with_different_prefixes_and_none_share_a_batch_with_generate_s_tokens():
    """One batch holds rows after a long prefix, rows after a shorter one and a row with none
    (masked columns up to the longest prefix, positions after each row's own): every row's tokens
    and log-probabilities are those of plain greedy `generate()` on its prompt alone."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from generate.backends.embedded import smollm2_dir

    tok = AutoTokenizer.from_pretrained(smollm2_dir())
    lm = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()
    long = "Judge how new the science of this story is, on a scale of zero to five. " * 6
    short = "Judge the characters of this story from zero to five. " * 4
    texts = [long + "Story: a probe wakes on a comet. Score:", short + "Story: the last lighthouse on Io. Score:",
             long + "Story: rust eats a ring city, slowly, then all at once. Score:",
             short + "Story: twins are raised by a ship. Score:", "Tell me a word for the sea:"]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    groups = shared_prefix_groups(prompts)
    assert sorted(len(g.prefix) > 0 for g in groups) == [False, True, True]
    assert len({len(g.prefix) for g in groups}) == 3
    got = greedy_with_prefix(lm, prompts, 3, tok.eos_token_id, {tok.eos_token_id}, 8)
    for ids, (tokens, dists) in zip(prompts, got):
        out = lm.generate(torch.tensor([ids]), max_new_tokens=3, do_sample=False, output_logits=True,
                          return_dict_in_generate=True, pad_token_id=tok.eos_token_id)
        assert tokens == out.sequences[0, len(ids):].tolist()[:len(tokens)]
        for d, logits in zip(dists, out.logits):
            assert float((d - torch.log_softmax(logits[0].float(), -1)).abs().max()) < 1e-3


@pytest.mark.slow
def test_a_prefix_the_store_holds_whole_costs_no_forward_pass(rubric_prompts):
    """At every GRPO step the judge's five rubric prefixes are already stored: reusing them must
    not run the model even on their last token (a ~80 ms pass per aspect)."""
    from generate.backends.hf.store import PrefixStore

    tok, lm, prompts = rubric_prompts
    store = PrefixStore()
    greedy_with_prefix(lm, prompts, 1, tok.eos_token_id, {tok.eos_token_id}, 8, store=store)
    shapes = []
    hook = lm.register_forward_pre_hook(lambda _, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
                                        with_kwargs=True)
    try:
        greedy_with_prefix(lm, prompts, 1, tok.eos_token_id, {tok.eos_token_id}, 8, store=store)
    finally:
        hook.remove()
    assert store.hits == 1
    assert len(shapes) == 1 and shapes[0][0] == 3  # the suffix pass of the three rows, nothing else


def test_prompts_whose_own_part_is_longer_than_the_shared_prefix_still_group():
    """The judge's rubric question (~250 tokens) is shorter than a 400-token story: its prompts
    must still share the question (they did not, and every story re-encoded it)."""
    question_a, question_b = [1] * 40 + [2] * 60, [1] * 40 + [3] * 60  # a shared opening, then the aspect
    stories = [[100 + i] * 300 for i in range(3)]
    prompts = [q + s for q in (question_a, question_b) for s in stories] + [question_a + [7] * 5]
    groups = {tuple(sorted(g.members)): len(g.prefix) for g in shared_prefix_groups(prompts, min_shared=8)}
    assert groups == {(0, 1, 2, 6): 100, (3, 4, 5): 100}
