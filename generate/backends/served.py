"""What an OpenAI-compatible server says of the model it serves under a name, so that a run resumed
against another model behind the same name is refused, as a retrained local model is
(`generate.backends.identity`): `vllm serve` restarted on another checkpoint with the same
`--served-model-name`, a llama.cpp server restarted on another GGUF under the same alias.

The server's model listing (`GET /v1/models`) is read once per backend. Only the fields that
describe the weights and stay put across restarts of the same model are kept (`STABLE_FIELDS`:
vLLM's `root` path, `parent` model of a LoRA and `max_model_len`, llama.cpp's `meta` with the
parameter count and file size, every server's `owned_by`); `created` is left out (vLLM stamps each
listing with the time), and so are permission ids. A server without a listing, or one that lists
no such model, or one that does not answer within `LISTING_TIMEOUT_S`, leaves the model known by
its name only, as before: a resumed run is refused only where both listings were read and differ,
and an invocation that read none leaves the recorded listing in the manifest
(`Resumable.check_backend`), so the next one is still compared with it.
"""

from __future__ import annotations

import logging

__all__ = ["LISTING_TIMEOUT_S", "STABLE_FIELDS", "served_identity"]

STABLE_FIELDS = ("root", "parent", "max_model_len", "owned_by", "meta")
LISTING_TIMEOUT_S = 10.0

log = logging.getLogger(__name__)


def served_identity(base_url: str | None, api_key: str, model: str, scrub=str) -> dict | None:
    """The `STABLE_FIELDS` the server lists for `model` (module doc); None where it lists none.

    Args:
        scrub: removes secrets from the one log line a failed listing gets."""
    import openai

    try:
        with openai.OpenAI(base_url=base_url, api_key=api_key, timeout=LISTING_TIMEOUT_S, max_retries=0) as client:
            cards = [card.to_dict() for card in client.models.list().data or []]
    except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:  # no listing, or not one
        log.info("%s: the server's model listing was not read (%s); the model is known by its name only",
                 model, scrub(f"{type(exc).__name__}: {exc}"))
        return None
    for card in cards:
        if card.get("id") == model:
            return {k: card[k] for k in STABLE_FIELDS if card.get(k) is not None} or None
    return None
