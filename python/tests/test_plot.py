"""attn.plot_attention and `python -m attn heatmap`: one head, a grid of
heads, each file format, the labels in the SVG, and the errors."""

import re
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

import attn

pytest.importorskip("matplotlib")

TOKENS = "the cat sat on the mat".split()


@pytest.fixture(scope="module")
def weights():
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 6, 16, generator=generator)
    k = torch.randn(1, 4, 6, 16, generator=generator)
    return attn.attention_weights(q, k, is_causal=True)


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_one_head_png(weights, tmp_path):
    path = tmp_path / "head.png"
    figure = attn.plot_attention(weights[0, 1], TOKENS, path=path)
    width, height = png_size(path)
    assert width > 200 and height > 200
    # One image and its colour bar, the tokens on both axes, values in cells.
    image_axes = [ax for ax in figure.axes if ax.images]
    assert len(image_axes) == 1 and len(figure.axes) == 2
    ax = image_axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS
    cells = [t.get_text() for t in ax.texts]
    assert len(cells) == 36 and cells[0] == "1.00" and cells[1] == "0.00"


def test_grid_svg_has_labels(weights, tmp_path):
    path = tmp_path / "grid.svg"
    attn.plot_attention(weights[0], TOKENS, path=path, heads=[0, 3], ncols=2)
    svg = path.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    texts = re.findall(r">([^<>]+)</text>", svg)
    for token in TOKENS:
        assert token in texts
    assert "head 0" in texts and "head 3" in texts and "head 1" not in texts
    # Two images side by side, each with its colour bar: a page wider than tall.
    width, height = (float(re.search(rf'{side}="([0-9.]+)pt"', svg).group(1))
                     for side in ("width", "height"))
    assert width > 1.5 * height > 150


def test_grid_has_a_colour_bar_per_image(weights):
    figure = attn.plot_attention(weights[0], TOKENS, ncols=3)
    image_axes = [ax for ax in figure.axes if ax.images]
    assert len(image_axes) == 4
    # One colour bar per image; the grid's two spare cells (2 x 3) blank.
    bars = [ax for ax in figure.axes if ax.get_label() == "<colorbar>"]
    spare = [ax for ax in figure.axes if not ax.images and ax not in bars]
    assert len(bars) == 4 and len(spare) == 2 and not any(ax.axison for ax in spare)


def test_all_heads_pdf_no_annotation_when_large(tmp_path):
    path = tmp_path / "heads.pdf"
    large = np.random.default_rng(0).random((3, 20, 30)).astype(np.float32)
    figure = attn.plot_attention(large, path=path, ncols=2)
    data = path.read_bytes()
    assert data[:5] == b"%PDF-" and data.rstrip().endswith(b"%%EOF")
    # Two rows of two cells (the fourth empty): the page's MediaBox in points.
    box = [float(x) for x in re.search(rb"/MediaBox \[ *([0-9. ]+)\]", data).group(1).split()]
    assert box[2] > 300 and box[3] > 300
    image_axes = [ax for ax in figure.axes if ax.images]
    assert len(image_axes) == 3 and not any(ax.texts for ax in image_axes)


def test_errors(weights, tmp_path):
    with pytest.raises(attn.Error, match="x_labels: 5 labels for 6 positions"):
        attn.plot_attention(weights[0, 0], TOKENS[:5])
    with pytest.raises(attn.Error, match="head 7 is not among the 4 heads"):
        attn.plot_attention(weights[0], heads=[7])
    with pytest.raises(attn.Error, match="does not end in one of"):
        attn.plot_attention(weights[0, 0], path=tmp_path / "w.bmp")
    with pytest.raises(attn.Error, match=r"shape \(2, 4, 6, 6\)"):
        attn.plot_attention(torch.zeros(2, 4, 6, 6))


def test_without_matplotlib_a_clear_message(tmp_path):
    # A process where matplotlib cannot be imported: the error names the
    # extra to install, and nothing is written.
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "import attn, numpy as np\n"
        "try:\n"
        f"    attn.plot_attention(np.eye(3, dtype=np.float32), path={str(tmp_path / 'w.png')!r})\n"
        "except attn.Error as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "needs matplotlib: pip install 'attn[viz]'" in done.stdout
    assert not (tmp_path / "w.png").exists()


def test_command(tmp_path):
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 6, 8, generator=generator).numpy()
    k = torch.randn(1, 2, 6, 8, generator=generator).numpy()
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "k.npy", k)
    np.save(tmp_path / "w.npy", attn.attention_weights(q, k))
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "attn", "heatmap", *args], capture_output=True, text=True)
    done = run(str(tmp_path / "w.npy"), "--x-labels", " ".join(TOKENS), "-o",
               str(tmp_path / "w.png"))
    assert done.returncode == 0, done.stderr
    assert png_size(tmp_path / "w.png")[0] > 200
    done = run("--query", str(tmp_path / "q.npy"), "--key", str(tmp_path / "k.npy"),
               "--causal", "--heads", "1", "-o", str(tmp_path / "qk.svg"))
    assert done.returncode == 0, done.stderr
    assert "head 1" in (tmp_path / "qk.svg").read_text()
    done = run(str(tmp_path / "w.npy"), "--x-labels", "a b", "-o", str(tmp_path / "x.png"))
    assert done.returncode == 1 and "x_labels: 2 labels for 6 positions" in done.stderr
