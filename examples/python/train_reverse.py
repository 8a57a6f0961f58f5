"""Trains a tiny encoder-decoder (tutorial_modules.Seq2Seq, on attn) to
reverse a sequence of digits, on the CPU, then draws its cross-attention.

    python examples/python/train_reverse.py [--steps 300] [--out reverse.png]

To write token t of the reversed sequence the decoder must read token
S - 1 - t of the source: a model that learned the task attends along the
anti-diagonal, which the heatmap shows and the script checks (the share of
target positions whose strongest cross-attention, averaged over the heads,
is on their mirror position); it exits with 1 unless the model reverses
more than 95 % of held-out tokens and more than 90 % of its strongest
cross-attention is on the mirror.
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
    """Greedy decoding of one held-out sequence, its cross-attention (the
    last step's, averaged over heads) and the anti-diagonal's share."""
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    source, target_in, target = batch_of(256, generator)
    logits, cross = model(source, target_in)
    accuracy = (logits.argmax(-1) == target).float().mean().item()
    mean = cross.mean(dim=1)                       # [B, St, Ss]
    mirror = torch.arange(LENGTH - 1, -1, -1)
    anti_diagonal = (mean.argmax(-1) == mirror).float().mean().item()
    return source[0], target[0], mean[0], accuracy, anti_diagonal


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default="reverse_cross_attention.png")
    args = parser.parse_args(argv)
    model, losses = train(args.steps)
    source, target, weights, accuracy, anti_diagonal = evaluate(model)
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; held-out token accuracy "
          f"{accuracy:.1%}; strongest cross-attention on the mirror position: "
          f"{anti_diagonal:.1%}")
    attn.plot_attention(weights, [str(int(t)) for t in source],
                        [str(int(t)) for t in target], path=args.out,
                        title="cross-attention (target rows, source columns)")
    print(f"wrote {args.out}")
    return 0 if accuracy > 0.95 and anti_diagonal > 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
