"""attn.plot_attention: attention weights drawn as heatmaps.

One head ([Sq, Sk]) as one image, or several heads ([H, Sq, Sk]) as a grid,
with the tokens on both axes (keys along x, queries along y), a colour bar
per image and, for small matrices, the values written in the cells. The file
format follows the path's suffix (.png, .svg, .pdf). matplotlib is an
optional dependency: `pip install attn[viz]`.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from ._core import Error

#: Cells at most this many (Sq * Sk) get their value written in by default.
ANNOTATE_CELLS = 256
_FORMATS = (".png", ".svg", ".pdf")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise Error(
            "attn.plot_attention needs matplotlib: pip install 'attn[viz]' "
            "(or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _as_numpy(weights):
    import numpy as np

    if hasattr(weights, "detach"):  # a torch.Tensor
        weights = weights.detach().to("cpu").float().numpy()
    return np.asarray(weights, dtype=np.float32)


def _labels(labels, count: int, axis: str):
    if labels is None:
        return [str(i) for i in range(count)]
    labels = [str(label) for label in labels]
    if len(labels) != count:
        raise Error(f"{axis}: {len(labels)} labels for {count} positions")
    return labels


def plot_attention(weights, x_labels: Optional[Sequence] = None,
                   y_labels: Optional[Sequence] = None, path=None,
                   heads: Optional[Sequence[int]] = None, ncols: int = 4,
                   annotate: Optional[bool] = None, title: Optional[str] = None,
                   cmap: str = "viridis"):
    """Draws attention weights as heatmaps; returns the matplotlib Figure.

    weights: one head [Sq, Sk], or heads [H, Sq, Sk] (a leading batch of 1
        is dropped), as attn.attention_weights gives them (PyTorch or NumPy).
    x_labels: the keys' tokens (Sk of them; default their indices).
    y_labels: the queries' tokens (Sq; default x_labels when Sq == Sk, else
        the indices).
    path: where to save it; the suffix picks the format (.png, .svg, .pdf).
        None: only return the figure.
    heads: the heads of a [H, Sq, Sk] tensor to draw (default all), as a
        grid of `ncols` columns, each titled with its head.
    annotate: write each weight in its cell; default when Sq * Sk <= 256.
    """
    import numpy as np

    array = _as_numpy(weights)
    while array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 2:
        stack, names = array[None], [None]
        if heads is not None:
            raise Error("heads: a single [Sq, Sk] matrix has no heads to choose")
    elif array.ndim == 3:
        chosen = list(range(array.shape[0])) if heads is None else [int(h) for h in heads]
        for head in chosen:
            if not 0 <= head < array.shape[0]:
                raise Error(f"heads: head {head} is not among the {array.shape[0]} heads")
        if not chosen:
            raise Error("heads: the list of heads to draw is empty")
        stack, names = array[chosen], [f"head {h}" for h in chosen]
    else:
        raise Error(
            f"weights: shape {tuple(array.shape)}; plot_attention draws [Sq, Sk] or "
            "[H, Sq, Sk] (or [1, H, Sq, Sk])"
        )
    if ncols < 1:
        raise Error(f"ncols is {ncols} but must be at least 1")
    if path is not None:
        suffix = str(path)[str(path).rfind("."):].lower() if "." in str(path) else ""
        if suffix not in _FORMATS:
            raise Error(f"path: {str(path)!r} does not end in one of {', '.join(_FORMATS)}")
    seq_q, seq_k = stack.shape[1:]
    xs = _labels(x_labels, seq_k, "x_labels")
    if y_labels is None and x_labels is not None and seq_q == seq_k:
        y_labels = x_labels
    ys = _labels(y_labels, seq_q, "y_labels")
    if annotate is None:
        annotate = seq_q * seq_k <= ANNOTATE_CELLS

    plt = _pyplot()
    count = len(stack)
    cols = min(ncols, count)
    rows = math.ceil(count / cols)
    cell = 0.45 if seq_k <= 24 else max(0.08, 10.0 / seq_k)
    width = max(3.5, seq_k * cell + 2.0)
    height = max(3.0, seq_q * cell + 1.5)
    figure, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows),
                                squeeze=False)
    for index, (matrix, name) in enumerate(zip(stack, names)):
        ax = axes[index // cols][index % cols]
        image = ax.imshow(matrix, cmap=cmap, aspect="auto", interpolation="nearest")
        figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        step_x = max(1, seq_k // 40)
        step_y = max(1, seq_q // 40)
        ax.set_xticks(np.arange(0, seq_k, step_x))
        ax.set_xticklabels(xs[::step_x], rotation=90)
        ax.set_yticks(np.arange(0, seq_q, step_y))
        ax.set_yticklabels(ys[::step_y])
        ax.set_xlabel("keys")
        ax.set_ylabel("queries")
        if name is not None:
            ax.set_title(name)
        if annotate:
            finite = matrix[np.isfinite(matrix)]
            middle = (finite.max() + finite.min()) / 2 if finite.size else 0.0
            for i in range(seq_q):
                for j in range(seq_k):
                    value = matrix[i, j]
                    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                            color="black" if value > middle else "white")
    for index in range(count, rows * cols):
        axes[index // cols][index % cols].axis("off")
    if title is not None:
        figure.suptitle(title)
    figure.tight_layout()
    if path is not None:
        # Text as text in an SVG (searchable, and the labels readable by
        # tools), not as paths.
        with plt.rc_context({"svg.fonttype": "none"}):
            figure.savefig(path)
    return figure
