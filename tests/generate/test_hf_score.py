"""`HFBackend.score` (surprisal's teacher forcing): batched, right-padded, the vocabulary projection
kept to continuation positions, log-probabilities taken at the target only; the same numbers as
one sequence at a time through the full log-softmax."""

from __future__ import annotations

import pytest
import torch

from generate.backends.hf.passes import chunks

pytestmark = pytest.mark.slow

PAIRS = [
    ([{"role": "user", "content": "Write one line about a comet."}], "The comet turned its tail toward home."),
    ([{"role": "user", "content": "Write a long opening for a story about a generation ship whose crew "
                                  "has forgotten that it is a ship, told by the ship's gardener."}],
     "Mira pruned the orchard every morning, and every morning the sky above it hummed."),
    ([{"role": "user", "content": "Say hi."}], "Hi."),
]


def test_batches_respect_rows_and_padded_tokens():
    assert chunks([40, 10, 20, 10], budget=40, max_rows=8) == [[1, 3], [2], [0]]
    assert chunks([5, 5, 5], budget=100, max_rows=2) == [[0, 1], [2]]
    assert chunks([500], budget=40, max_rows=4) == [[0]]  # one long row still goes


def test_scores_equal_one_sequence_at_a_time_through_the_full_log_softmax():
    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf import HFBackend

    backend = HFBackend(str(smollm2_dir()), batch_size=8, dtype="float32")
    batched = backend.score(PAIRS)
    tok, lm = backend.tokenizer, backend.lm
    for (messages, cont), got in zip(PAIRS, batched):
        prompt = tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                     add_special_tokens=False)["input_ids"]
        ids = prompt + tok(cont, add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            lp = torch.log_softmax(lm(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
        want = [float(lp[t - 1, ids[t]]) for t in range(len(prompt), len(ids))]
        assert got == pytest.approx(want, abs=1e-4)
    for one, many in zip(backend.score(PAIRS, batch_size=1), batched):
        assert one == pytest.approx(many, abs=1e-4)
