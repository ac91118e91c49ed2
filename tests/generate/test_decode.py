"""The fast path's sampled decoding: the nucleus it keeps, a random stream per request, and
prefixes reused from earlier prompts (same tokens as recomputing them, on the real model)."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import TopPLogitsWarper

from generate.backends.hf.sampling import nucleus, sample
from generate.backends.hf.store import PrefixStore


@pytest.mark.parametrize("scale", [0.5, 2.0, 6.0])
def test_the_nucleus_is_the_set_transformers_keeps(scale):
    torch.manual_seed(0)
    logits = torch.randn(6, 5000) * scale
    ref = TopPLogitsWarper(0.9)(None, logits.clone())
    idx, kept = nucleus(torch.softmax(logits, -1), 0.9, k=64)  # small k: both wider reads (1,024, then all) run
    for r in range(6):
        mine = set(idx[r][kept[r] > 0].tolist())
        theirs = set((ref[r] > -torch.inf).nonzero().flatten().tolist())
        assert len(mine ^ theirs) <= 1  # at most the boundary token, where float sums round differently


def test_a_requests_draws_depend_on_its_own_seed_only():
    torch.manual_seed(1)
    logits = torch.randn(3, 1000)
    gens = lambda seeds: [torch.Generator().manual_seed(s) for s in seeds]  # noqa: E731
    together = sample(logits, 0.9, 0.95, gens([11, 12, 13]))
    alone = sample(logits[1:2], 0.9, 0.95, gens([12]))
    assert int(together[1]) == int(alone[0])
    flat = torch.zeros(1, 1000)  # its nucleus runs past the top-k, so it draws more numbers than a row whose
    peaked = torch.randn(1, 1000) * 3  # nucleus does not: that must not advance the other row's stream
    mixed_gens, alone_gens = gens([7, 8]), gens([8])
    for _ in range(5):
        assert int(sample(torch.cat([flat, peaked]), 1.0, 0.9, mixed_gens)[1]) == int(
            sample(peaked, 1.0, 0.9, alone_gens)[0])
    draws = torch.stack([sample(logits[:1], 1.0, 1.0, gens([s])) for s in range(4000)]).flatten()
    probs = torch.softmax(logits[0], -1)
    top = int(probs.argmax())
    assert abs(float((draws == top).float().mean()) - float(probs[top])) < 0.03  # Gumbel-max draws from p


def test_top_p_1_draws_from_p_when_early_tokens_underflow_to_zero():
    """With top_p 1 the whole vocabulary is read in token order. At a low temperature the
    probabilities of far-off tokens underflow to 0; with such a token before the likely ones, a row
    drew fewer numbers than its candidates and the first undrawn candidate won every draw (its
    Gumbel score infinite): here token 500 instead of token 999, whose probability is 0.98."""
    logits = torch.zeros(1, 1000)
    logits[0, :500] = -200.0  # probability 0 once divided by the temperature
    logits[0, 999] = 10.0
    draws = [int(sample(logits, 1.0, 1.0, [torch.Generator().manual_seed(s)])) for s in range(200)]
    assert min(draws) >= 500 and 185 <= draws.count(999) < 200  # p(999) = e^10 / (e^10 + 499) = 0.978


def test_the_store_returns_the_longest_common_prefix_and_keeps_its_budget():
    kv = lambda n: [(torch.zeros(1, n, 2), torch.ones(1, n, 2))]  # noqa: E731 - one layer, H=1, D=2
    store = PrefixStore(budget_bytes=10_000)
    base = list(range(100))
    store.add(base + [7, 7, 7], kv(103))
    store.add(base + [8] * 20, kv(120))
    n, got, _ = store.lookup(base + [8] * 10 + [9])
    assert n == 110 and got[0][0].shape == (1, 110, 2)
    assert store.lookup(base + [8] * 20)[0] == 119  # an exact repeat keeps one token of its own
    assert store.lookup(list(range(1, 200)))[0] == 0  # other first tokens: no candidate
    store.add(list(range(500, 1000)), kv(500))  # over budget: the least recently used entry goes
    assert store.size <= 10_000 and len(store.entries) == 2
    assert store.lookup(base + [7, 7, 7, 7])[0] == 100  # only the shared base, from the [8] entry


def test_a_wide_round_keeps_the_histories_its_next_batch_reuses():
    """Round three of a wide run: batch A's conversations reuse their round-two histories and store
    their continuations, then batch B reuses its own. Least-recently-used eviction alone pushed out
    B's histories (untouched since round two) and kept A's, which A had just moved past."""
    kv = lambda n: [(torch.zeros(1, n, 2), torch.ones(1, n, 2))]  # noqa: E731 - 16 bytes a token
    history = {name: [i * 1000 + t for t in range(100)] for i, name in enumerate(("a1", "a2", "b1", "b2"))}
    store = PrefixStore(budget_bytes=10_000)
    for tokens in history.values():
        store.add(tokens, kv(100))  # round two's entries: 4 x 1,600 bytes
    for name in ("a1", "a2"):  # batch A: the prompt re-renders the last 10 tokens of the reply
        prompt = history[name][:90] + [7] * 40
        got = store.lookup(prompt)
        assert got.tokens == 90 and got.key == tuple(history[name])
        store.add(prompt + [8] * 20, kv(150), supersedes=got.key)  # 2,400 bytes: over budget
    assert store.size <= 10_000
    for name in ("b1", "b2"):
        assert store.lookup(history[name] + [9]).tokens == 100  # batch B still finds its histories


def test_an_entry_held_whole_by_its_continuation_goes_at_once():
    kv = lambda n: [(torch.zeros(1, n, 2), torch.ones(1, n, 2))]  # noqa: E731
    store = PrefixStore(budget_bytes=1 << 20)
    first = list(range(100))
    store.add(first, kv(100))
    got = store.lookup(first + [5])
    store.add(first + [5, 6], kv(102), supersedes=got.key)
    assert list(store.entries) == [tuple(first + [5, 6])] and store.size == 102 * 16
    assert store.lookup(first + [1]).tokens == 100  # what the old entry served, the new one serves


def test_a_machine_short_of_memory_makes_the_store_drop_its_oldest_entries():
    """The budget bounds what the store counts; the machine can still run short (the next batch's
    decode cache, the heap's freed pages). Below the reserve, entries go, least recently used first,
    until the machine has it again; with memory to spare, nothing goes."""
    kv = lambda n: [(torch.zeros(1, n, 2), torch.ones(1, n, 2))]  # noqa: E731 - 16 bytes a token
    other = {"bytes": 0}  # what the rest of the process holds
    machine = 10_000  # bytes of memory, of which the store's entries and `other` take their share
    store = PrefixStore(budget_bytes=1 << 20, reserve_bytes=4_000,
                        available=lambda: machine - store.size - other["bytes"])
    entries = [[i * 1000 + t for t in range(100)] for i in range(4)]
    for tokens in entries:
        store.add(tokens, kv(100))  # 4 x 1,600 bytes: 3,600 left, under the reserve
    assert [k[0] for k in store.entries] == [1000, 2000, 3000]  # the oldest went, budget or not
    assert store.relieved == 1
    store.lookup(entries[1] + [5])  # entry 1 is now the most recently used
    other["bytes"] = 2_000  # the process takes more memory
    store.add(list(range(9000, 9100)), kv(100))
    assert machine - store.size - other["bytes"] >= 4_000
    assert [k[0] for k in store.entries] == [1000, 9000]  # 2 and 3 went; 1 was used since
    unbounded = PrefixStore(budget_bytes=1 << 20, available=lambda: 0)  # no reserve: never checked
    unbounded.add(entries[0], kv(100))
    assert len(unbounded.entries) == 1


def test_the_store_counts_prompt_tokens_served_not_the_openings_encoded_for_them():
    """An opening two prompts share is encoded once after what the store holds of it; that lookup
    served no prompt, and each prompt then counts its whole reuse: counting both reported the
    store's part twice in a run's `reused_tokens` (and its "% of them from the prefix store")."""
    from types import SimpleNamespace

    from generate.backends.hf.decode import store_shared_prefixes

    def encode(ids, positions, past, mask, keep):  # a one-layer stand-in: only shapes matter here
        kv = torch.zeros(ids.shape[0], 1, (past[0][0].shape[2] if past else 0) + ids.shape[1], 2)
        return torch.zeros(ids.shape[0], len(keep), 5), [(kv, kv + 1)]

    store, held = PrefixStore(), list(range(100))
    store.add(held, [(torch.zeros(1, 100, 2), torch.ones(1, 100, 2))])
    opening = held + list(range(1000, 1100))
    prompts = [opening + [1, 2], opening + [3]]
    assert store_shared_prefixes(SimpleNamespace(device=torch.device("cpu")), prompts, store, 0, encode) == 1
    assert (store.hits, store.reused_tokens) == (0, 0)
    assert [store.lookup(p).tokens for p in prompts] == [200, 200]
    assert (store.hits, store.reused_tokens) == (2, 400)


@pytest.mark.slow
def test_reused_prefixes_give_the_same_tokens_as_recomputing_them():
    """A debate-like second round (history + reply + a new turn) through the real model in float32:
    with the store, most of each prompt is reused, and the sampled tokens are the same."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf.decode import sample_batch

    tok = AutoTokenizer.from_pretrained(smollm2_dir())
    lm = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()

    def ids(messages):
        return tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                   add_special_tokens=False)["input_ids"]

    first = [[{"role": "user", "content": f"Writing task: a story about a comet, take {i}. About 300 words."}]
             for i in range(3)]
    store, stop = PrefixStore(), {tok.eos_token_id}
    replies = sample_batch(lm, [ids(m) for m in first], max_new_tokens=24, temperature=0.9, top_p=0.9,
                           seeds=[1, 2, 3], pad_id=tok.eos_token_id, stop_ids=stop, store=store)
    second = [ids(m + [{"role": "assistant", "content": tok.decode(r, skip_special_tokens=True)},
                       {"role": "user", "content": "Read the others' stories and write an updated one."}])
              for m, r in zip(first, replies)]
    reused = sample_batch(lm, second, max_new_tokens=16, temperature=0.9, top_p=0.9, seeds=[4, 5, 6],
                          pad_id=tok.eos_token_id, stop_ids=stop, store=store)
    assert store.hits == 3 and store.reused_tokens > 0.6 * sum(map(len, second))
    fresh = sample_batch(lm, second, max_new_tokens=16, temperature=0.9, top_p=0.9, seeds=[4, 5, 6],
                         pad_id=tok.eos_token_id, stop_ids=stop)
    assert reused == fresh


def test_prefill_groups_rows_by_length_within_the_token_budget():
    from generate.backends.hf.passes import chunks

    groups = chunks([300, 10, 12, 290, 11, 900], budget=620)
    assert groups == [[1, 4, 2], [3, 0], [5]]  # sorted; 3 x 12 <= 620, 2 x 300 <= 620; a long row alone
    assert sorted(r for g in groups for r in g) == list(range(6))


def test_rows_leave_the_cache_in_place_moving_one_row_per_leaver():
    """When rows leave a batch, each leaver's slot takes a live row from the tail and the buffers
    narrow to a view: the same storage, no kept row copied again (indexing the buffers instead
    copied every kept row into fresh memory at each leave, ~3 GB a leave at full width)."""
    from generate.backends.hf.cache import RoomyCache, compaction

    assert compaction([0, 2, 3, 5]) == [0, 5, 2, 3]  # rows 1 and 4 left: 1's slot takes 5, 4 is past the end
    assert compaction([0, 1, 2]) == [0, 1, 2] and compaction([4]) == [4]
    torch.manual_seed(0)
    buffers = [(torch.randn(6, 2, 9, 4), torch.randn(6, 2, 9, 4)) for _ in range(2)]
    expect = [(k.clone(), v.clone()) for k, v in buffers]
    cache = RoomyCache(3, buffers, used=5)
    storage = [layer._k.untyped_storage().data_ptr() for layer in cache.layers]
    order = compaction([0, 2, 3, 5])
    cache.batch_select_indices(torch.tensor(order))
    for layer, (k, v), ptr in zip(cache.layers, expect, storage):
        assert layer._k.untyped_storage().data_ptr() == ptr and layer._k.shape[0] == 4
        assert torch.equal(layer.keys, k[order, :, :5]) and torch.equal(layer.values, v[order, :, :5])
        assert layer.extend(1) == 5  # decoding goes on in the narrowed buffers
    cache.batch_select_indices(torch.tensor([2, 0]))  # any other order: still right, by copying
    assert torch.equal(cache.layers[0].keys[:, :, :5], expect[0][0][[2, 0], :, :5])


@pytest.mark.slow
def test_rows_that_leave_at_different_steps_sample_what_they_sample_alone(fp32_writer):
    """Frequent stop tokens make rows leave one by one and the tail fill their slots: each row's
    tokens are still those it samples alone (float32, same seeds)."""
    from generate.backends.hf.decode import sample_batch

    tok, lm, ids = fp32_writer
    prompts = [ids(f"Tell a story about {w}.") for w in ("rain", "a robot", "the sea", "Mars", "a clock", "bees")]
    stop = {t for t in range(tok.vocab_size) if t % 5 == 0} | {tok.eos_token_id}
    kwargs = {"max_new_tokens": 16, "temperature": 1.0, "top_p": 1.0, "pad_id": tok.eos_token_id, "stop_ids": stop}
    together = sample_batch(lm, prompts, seeds=list(range(6)), **kwargs)
    assert len({len(t) for t in together}) >= 3  # rows did leave at different steps
    alone = [sample_batch(lm, [p], seeds=[s], **kwargs)[0] for s, p in enumerate(prompts)]
    assert together == alone


@pytest.fixture(scope="module")
def fp32_writer():
    """(tokenizer, the bundled writer in float32, text -> chat-formatted prompt ids), loaded once."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from generate.backends.embedded import smollm2_dir

    tok = AutoTokenizer.from_pretrained(smollm2_dir())
    lm = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()

    def ids(text):
        return tok(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                           tokenize=False), add_special_tokens=False)["input_ids"]

    return tok, lm, ids


@pytest.mark.slow
def test_a_prompts_tokens_do_not_depend_on_the_rows_it_is_batched_with(fp32_writer):
    """Prompts of very different lengths, some with a reused prefix and some without, prefilled in
    separate groups and decoded together, sample what each samples alone (float32, same seeds)."""
    from generate.backends.hf.decode import sample_batch

    tok, lm, ids = fp32_writer
    base = "Writing task: a story about a lighthouse on a moon. " * 6
    store, stop = PrefixStore(), {tok.eos_token_id}
    sample_batch(lm, [ids(base)], max_new_tokens=8, temperature=0.9, top_p=0.9, seeds=[0],
                 pad_id=tok.eos_token_id, stop_ids=stop, store=store)
    prompts = [ids(base + "Now make it sad."), ids("Hi."), ids("A story about rain, " * 20), ids(base + "Shorter.")]
    kwargs = {"max_new_tokens": 12, "temperature": 0.9, "top_p": 0.9, "pad_id": tok.eos_token_id, "stop_ids": stop}
    together = sample_batch(lm, prompts, seeds=[1, 2, 3, 4], store=store, **kwargs)
    assert store.hits >= 2  # the two rows that start with `base` reused it, the others did not
    alone = [sample_batch(lm, [p], seeds=[s], **kwargs)[0] for p, s in zip(prompts, [1, 2, 3, 4])]
    assert together == alone


@pytest.mark.slow
def test_a_prefix_shared_within_a_batch_is_encoded_once_and_changes_no_token(fp32_writer):
    """Two prompts share a long opening the store does not hold (a reviewer's two reviews): it is
    encoded once, both reuse it, and each samples what it samples alone (float32, same seeds)."""
    from generate.backends.hf.decode import sample_batch
    from generate.backends.hf.store import common_prefix

    tok, lm, ids = fp32_writer
    head = "You are a critic. Review this story about a lighthouse on a moon, its world and its people. " * 3
    prompts = [ids(head + "Story: the keeper sang."), ids("Hi."), ids(head + "Story: the moon was silent.")]
    shared = common_prefix(tuple(prompts[0]), prompts[2])
    store, stop = PrefixStore(), {tok.eos_token_id}
    kwargs = {"max_new_tokens": 10, "temperature": 0.9, "top_p": 0.9, "pad_id": tok.eos_token_id, "stop_ids": stop}
    together = sample_batch(lm, prompts, seeds=[1, 2, 3], store=store, **kwargs)
    # Stored, then superseded by the rows' own entries, which hold it whole.
    assert any(key[:shared] == tuple(prompts[0][:shared]) for key in store.entries)
    assert store.hits == 2 and store.reused_tokens == 2 * shared
    alone = [sample_batch(lm, [p], seeds=[s], **kwargs)[0] for p, s in zip(prompts, [1, 2, 3])]
    assert together == alone


@pytest.mark.slow
def test_the_static_path_samples_the_fast_paths_tokens(fp32_writer):
    """The GPU path's loop (`static.py`: left-padded static cache, in-place 4D mask, every row decoded
    to the end) run eagerly here: each request gets the tokens the `fast` loop gives it (float32,
    same seeds), with rows stopping at different steps and padding rows in the batch."""
    from generate.backends.hf.decode import sample_batch
    from generate.backends.hf.static import sample_static

    tok, lm, ids = fp32_writer
    prompts = [ids(f"Tell a story about {w}.") for w in ("rain", "a robot who keeps bees", "Mars")]
    stop = {t for t in range(tok.vocab_size) if t % 7 == 0} | {tok.eos_token_id}
    kwargs = {"max_new_tokens": 12, "temperature": 0.9, "top_p": 0.9, "pad_id": tok.eos_token_id, "stop_ids": stop,
              "seeds": [3, 4, 5]}
    static = sample_static(lm, prompts, **kwargs)
    assert static == sample_batch(lm, prompts, **kwargs)
    assert len({len(t) for t in static}) >= 2  # rows stopped at different steps


def test_the_static_prefill_mask_is_causal_over_real_keys_with_each_query_on_itself():
    """Built in place (no rows x W x W temporaries); checked against its definition, cell by cell."""
    from generate.backends.hf.static import layout, prefill_mask

    prompts = [[5, 6, 7], [8], [9, 9]]
    _, real = layout(prompts, pad_id=0, rows=4, width=3)
    mask = prefill_mask(real, columns=5)
    assert mask.shape == (4, 1, 3, 5) and not mask[..., 3:].any()
    for r in range(4):
        for q in range(3):
            for k in range(3):
                assert bool(mask[r, 0, q, k]) == ((k <= q and bool(real[r, k])) or k == q), (r, q, k)


@pytest.mark.slow
def test_the_static_decode_step_has_nothing_that_stops_a_cuda_graph_capture(fp32_writer):
    """On CUDA the static step is captured once as a graph; a host sync inside the forward (an
    `.item()`, a branch on a tensor's value) makes the capture fail and the path decode eagerly,
    slowly. No GPU here, so dynamo traces the same step: such a sync is a graph break to it. A
    transformers upgrade that adds one fails this test instead of a lent GPU's run."""
    import torch._dynamo as dynamo
    from transformers import StaticCache

    from generate.backends.hf.static import Step, layout, prefill_mask

    tok, lm, ids = fp32_writer
    prompts = [ids("Tell a story about rain."), ids("A robot who keeps bees on Mars, please.")]
    width, columns = max(map(len, prompts)), 128
    prompt_ids, real = layout(prompts, tok.eos_token_id, rows=8, width=width)
    cache = StaticCache(config=lm.config, max_cache_len=columns)
    positions = (real.cumsum(dim=1) - 1).clamp_min(0)
    with torch.inference_mode():
        lm(input_ids=prompt_ids, position_ids=positions, attention_mask=prefill_mask(real, columns),
           past_key_values=cache, use_cache=True, logits_to_keep=1)
        mask = torch.zeros((8, 1, 1, columns), dtype=torch.bool)
        mask[:, 0, 0, :width + 1] = torch.cat([real, torch.ones(8, 1, dtype=torch.bool)], dim=1)
        step = Step(lm, cache, mask, graphs=False)
        step.tokens.fill_(tok.eos_token_id)
        step.positions.copy_(positions[:, -1:] + 1)
        try:
            report = dynamo.explain(step._forward)()
        finally:
            dynamo.reset()
    assert report.graph_break_count == 0, [b.reason for b in report.break_reasons]
    assert report.graph_count == 1
