"""Trains a tiny encoder-decoder (tutorial_modules.Seq2Seq, on attn) to
reverse a sequence of digits, on the CPU, then draws its cross-attention.

    python examples/python/train_reverse.py [--steps 300] [--out reverse.png]

To write token t of the reversed sequence the decoder must read token
S - 1 - t of the source: a model that learned the task attends along the
anti-diagonal, which the heatmap shows and the script checks (the share of
target positions whose strongest cross-attention, averaged over the heads,
is on their mirror position); it exits with 1 unless the model, decoding
held-out sequences greedily (each token after its own previous outputs),
gets more than 95 % of their tokens right and more than 90 % of its
strongest cross-attention is on the mirror.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

import attn  # noqa: E402
from tutorial_modules import Seq2Seq  # noqa: E402

VOCAB, BOS, LENGTH = 12, 11, 8  # digits 0..9, padding 10 (unused), start 11


def batch_of(size: int, generator: torch.Generator):
    source = torch.randint(0, 10, (size, LENGTH), generator=generator)
    target = source.flip(1)
    target_in = torch.cat([torch.full((size, 1), BOS), target[:, :-1]], dim=1)
    return source, target_in, target


def progress(step: int, steps: int, loss: float, accuracy: float, start: float) -> None:
    width = 30
    done = int(width * step / steps)
    bar = "#" * done + "." * (width - done)
    sys.stderr.write(f"\r[{bar}] {step}/{steps} loss {loss:.3f} "
                     f"token accuracy {accuracy:.0%} {time.time() - start:.0f} s")
    sys.stderr.flush()


def train(steps: int = 300, batch: int = 64, seed: int = 0, quiet: bool = False,
          lr: float = 2e-3, **model_options):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = Seq2Seq(VOCAB, **model_options)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    start = time.time()
    losses = []
    for step in range(1, steps + 1):
        source, target_in, target = batch_of(batch, generator)
        logits, _ = model(source, target_in)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if not quiet and (step % 10 == 0 or step == steps):
            accuracy = (logits.argmax(-1) == target).float().mean().item()
            progress(step, steps, loss.item(), accuracy, start)
    if not quiet:
        sys.stderr.write("\n")
    return model, losses


@torch.no_grad()
def evaluate(model, seed: int = 1):
    """Greedy decoding of held-out sequences: each output token is the most
    likely one after the model's own previous outputs (not the true ones).
    Returns the first sequence, its decoded output, its cross-attention (the
    last step's, over the whole output, averaged over the heads), the share
    of tokens right, the share of whole sequences reversed, and the share of
    output positions whose strongest cross-attention is on the mirror."""
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    source, _, target = batch_of(256, generator)
    memory = model.encode(source)
    decoded = torch.full((source.size(0), 1), BOS)
    for _ in range(LENGTH):
        logits, cross = model.decode(decoded, memory)
        decoded = torch.cat([decoded, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    output = decoded[:, 1:]
    right = output == target
    accuracy = right.float().mean().item()
    sequences = right.all(dim=1).float().mean().item()
    mean = cross.mean(dim=1)                       # [B, St, Ss]
    mirror = torch.arange(LENGTH - 1, -1, -1)
    anti_diagonal = (mean.argmax(-1) == mirror).float().mean().item()
    return source[0], output[0], mean[0], accuracy, sequences, anti_diagonal


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default="reverse_cross_attention.png")
    args = parser.parse_args(argv)
    model, losses = train(args.steps)
    source, output, weights, accuracy, sequences, anti_diagonal = evaluate(model)
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; held-out, decoded greedily: "
          f"{accuracy:.1%} of tokens, {sequences:.1%} of whole sequences reversed; "
          f"strongest cross-attention on the mirror position: {anti_diagonal:.1%}")
    attn.plot_attention(weights, [str(int(t)) for t in source],
                        [str(int(t)) for t in output], path=args.out,
                        title="cross-attention (target rows, source columns)")
    print(f"wrote {args.out}")
    return 0 if accuracy > 0.95 and anti_diagonal > 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
