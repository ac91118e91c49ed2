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


def image_formats() -> list[str]:
    """The file extensions `savefig` writes (png, pdf, svg, ...), without importing pyplot."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())
