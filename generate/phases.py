"""Lockstep driving of many protocols: the batching pattern every multi-step job of the project uses.

A protocol (a generation framework, a curation pipeline, an adversarial optimisation round) is a
generator: it yields the requests of its next phase and receives their replies. `drive` advances
a set of protocols together, so each round of `answer` sees every pending request of every
protocol at once and can send them to the backend as one batch (phase-synchronous batching), and
tests can drive a protocol with scripted replies. Protocols never call a model themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
S = TypeVar("S")
R = TypeVar("R")
T = TypeVar("T")


def drive(protocols: Mapping[K, Generator[S, R, T]], answer: Callable[[dict[K, S]], Mapping[K, R]]) -> dict[K, T]:
    """Run protocols in lockstep until each returns.

    Args:
        protocols: key -> a started-or-fresh generator yielding steps and receiving replies.
        answer: given {key: current step} of every protocol still running, the replies to send
            back ({key: reply}); a key missing from the result abandons that protocol (e.g. it
            failed), and it gets no result.

    Returns:
        {key: the value each finished protocol returned}.
    """
    steps = {k: next(g) for k, g in protocols.items()}
    results: dict[K, T] = {}
    while steps:
        replies = answer(dict(steps))
        for k in list(steps):
            if k not in replies:
                protocols[k].close()
                del steps[k]
                continue
            try:
                steps[k] = protocols[k].send(replies[k])
            except StopIteration as stop:
                results[k] = stop.value
                del steps[k]
    return results
