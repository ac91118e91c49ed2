"""Top-p sampling for the sampled decode loop, without sorting the vocabulary, one random stream
per request.

- **Top-p from a top-k.** The nucleus (the most likely tokens whose mass before them is < top_p,
  exactly the set `TopPLogitsWarper` keeps) is read off `topk(K)`; only a row whose nucleus does
  not end within its K most likely tokens is read again wider, so the kept set is exact. Sorting
  the whole vocabulary (and `torch.multinomial` over it) at every step cost more than the model.
- **Gumbel-max with a generator per request.** argmax(log p + Gumbel noise) draws from p, and the
  noise of a request comes from its own generator, seeded by the request's seed: a request's
  tokens depend on its seed and its logits, not on which other requests share its batch or in
  which order they arrived. (Logits can still differ in the last bits with batch composition.)
"""

from __future__ import annotations

import torch

NUCLEUS_K = 256  # candidates read per row before falling back to a wider read


def nucleus(probs: torch.Tensor, top_p: float, k: int = NUCLEUS_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The nucleus of each row: (token ids, probabilities), padded with probability 0.

    A token is kept when the probability mass of the tokens ranked above it is < top_p (the first
    token always), as `transformers`' `TopPLogitsWarper` keeps it. Rows whose nucleus goes on past
    their k most likely tokens (a few percent of a Review run's rows) are read again with 16 times
    k, up to the whole vocabulary: a wider top-k still costs far less than a full sort.
    """
    k = min(k, probs.shape[-1])
    vals, idx = probs.topk(k, dim=-1)
    before = vals.cumsum(dim=-1) - vals
    keep = before < top_p
    keep[:, 0] = True
    kept = torch.where(keep, vals, torch.zeros_like(vals))
    spill = keep[:, -1] & (before[:, -1] + vals[:, -1] < top_p)  # the nucleus goes on past k
    if k < probs.shape[-1] and spill.any():
        rows = spill.nonzero(as_tuple=True)[0]
        wide_idx, wide_kept = nucleus(probs[rows], top_p, 16 * k)
        width = int((wide_kept > 0).sum(dim=-1).max())
        idx, kept = (torch.nn.functional.pad(t, (0, max(0, width - k))) for t in (idx, kept))
        idx[rows, :width] = wide_idx[:, :width]
        kept[rows, :width] = wide_kept[:, :width]
        kept[rows, width:] = 0
    return idx, kept


def sample(logits: torch.Tensor, temperature: float, top_p: float, generators: list[torch.Generator]) -> torch.Tensor:
    """One token per row from softmax(logits / temperature) restricted to its top-p nucleus."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        idx, kept = nucleus(probs, top_p)
    else:
        idx, kept = torch.arange(probs.shape[-1]).expand_as(probs), probs
    # A row draws as many numbers as its own nucleus needs (at least NUCLEUS_K), never as many as the
    # widest row of its batch: else one long-tailed neighbour would shift every row's random stream.
    draws = _draws(kept, min(NUCLEUS_K, kept.shape[-1]))
    noise = torch.ones(kept.shape)  # past a row's draws every candidate has probability 0
    for r, (g, d) in enumerate(zip(generators, draws)):
        noise[r, :d] = torch.rand(d, generator=g)
    noise = noise.to(kept.device)  # drawn on the host, where the generators are: one copy, not one a row
    gumbel = -torch.log(-torch.log(noise.clamp_min(1e-20)))
    scores = torch.where(kept > 0, kept.log() + gumbel, torch.full_like(kept, -torch.inf))
    return idx.gather(-1, scores.argmax(dim=-1, keepdim=True)).squeeze(-1)


def _draws(kept: torch.Tensor, least: int) -> list[int]:
    """Per row, how many random numbers it draws: up to its last candidate of nonzero probability, so
    that every such candidate gets a number of its own (one past the draws would get the noise of a
    1, an infinite Gumbel score, and win whatever its probability). A nucleus lists its candidates
    first; the whole vocabulary (top_p 1) is in token order, where a token whose probability
    underflowed to 0 (a low temperature) can sit before ones that did not."""
    columns = torch.arange(kept.shape[-1], device=kept.device)
    return (torch.where(kept > 0, columns, -1).amax(dim=-1) + 1).clamp_min(least).tolist()


def generators(seeds: list[int | None]) -> list[torch.Generator]:
    """One random stream per request, seeded by its seed (an unseeded request draws a seed from
    torch's global generator, offset by its row)."""
    out = []
    for r, seed in enumerate(seeds):
        g = torch.Generator()
        g.manual_seed(int(seed) if seed is not None else int(torch.randint(0, 2**31 - 1, ())) + r)
        out.append(g)
    return out
