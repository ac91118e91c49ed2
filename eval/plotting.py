"""Matplotlib for files only.

Every plot in this project is written to a PNG next to its numbers, often on machines without a
display (training nodes, CI), so pyplot is always imported on the headless Agg backend, and only
when a plot is actually drawn (importing it costs about a second).
"""

from __future__ import annotations


def pyplot():
    """`matplotlib.pyplot` on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
