"""The hf policy's int4 number format: a causal LM's weights held in 4 bits for generation on a CPU.

Decoding one token reads every weight once, so on a CPU its speed is set by the bytes the weights
take: 540 MB a token for the bundled SmolLM2-135M in float32. That checkpoint was dequantized from a
GGUF file (scripts/fetch_model.py) whose linear layers are Q4_1 (blocks of 32 weights, each one of
16 levels between the block's minimum and maximum) and whose tied embedding is Q8_0 (blocks of 32,
a scale times a signed byte), so its float32 weights lie exactly on those grids and go back into
them without moving: about 100 MB read a token.

The kernel is torch's own for 4-bit weights on a CPU (`_weight_int4pack_mm_for_cpu`), fast only
with bfloat16 inputs (float32 ones ran 30 times slower: 91 against 3 ms for the model's layers). So
each converted layer takes its input in bfloat16 and gives its output back in the model's dtype;
norms, attention and the residual stream stay float32. A greedy reply is then as close to float32's
as bfloat16 arithmetic allows: where two tokens are nearly tied it may take the other one
(bench/model_speed.py measures how often).

A prompt (more than DENSE_ROWS rows) is computed as a plain matrix product instead, in bfloat16 where
the CPU computes bfloat16 natively (AVX512-BF16 or AMX): the layers keep a bfloat16 copy of their
weights, 212 MB for the bundled model, so a process holding it in int4 had 684 MB of private memory
after a step against float32's 321 (whose weights stay a shared mapping of the checkpoint file).
Where it does not (AVX2: most laptops, many servers), bfloat16 is emulated and a product of the
agent's ~1,000-token prompt ran 8.5 times slower than float32's (92 against 11 ms for one of the
model's 576×1536 layers): the prompt then goes through the checkpoint's own float32 weights (no copy:
they are already on the grid) and only decoding uses the kernel. The agent's first step with 64
tokens: 15.2 s in int4 with the bfloat16 copy against 6.5 in float32 on such a CPU.

For inference only: the checkpoint on disk is never touched, and trainers load their own float32
copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from core.hardware import native_bfloat16

GROUP = 32  # weights sharing one scale: GGUF's block, and a group size the kernel takes
# The 4-bit kernel is built for a few rows (decoding); past this many (a prompt), a plain matrix
# product over the same weights (bfloat16, or float32 where bfloat16 is emulated) is faster. CPU
# time for 70 of the model's layers in bfloat16: even at 32 rows, 36 against 23 ms at 64, 530
# against 396 at 1,000 (the agent's first prompt is ~1,000 tokens).
DENSE_ROWS = 32
# A weight that came from the format sits on its level up to float rounding (exactly, for every weight
# of the bundled model); one a training step moved is anywhere between two.
ON_GRID = 1e-3


class Int4Unsupported(ValueError):
    """The model has a linear layer the kernel cannot take (its shape)."""


@dataclass(frozen=True)
class Grid:
    """A weight matrix in blocks of GROUP along its input: weight ≈ levels * scale + offset per block."""

    levels: torch.Tensor  # int32, out × in
    scale: torch.Tensor  # out × in/GROUP
    offset: torch.Tensor  # out × in/GROUP
    off_grid: float  # how far the farthest weight lies from its level, in steps; ~0 when it is the format's


def q4_grid(weight: torch.Tensor) -> Grid:
    """GGUF's Q4_1: 16 levels from each block's minimum to its maximum."""
    blocks = _blocks(weight)
    low = blocks.amin(-1, keepdim=True)
    scale = (blocks.amax(-1, keepdim=True) - low) / 15
    steps = (blocks - low) / torch.where(scale == 0, 1.0, scale)
    levels = steps.round().clamp(0, 15)
    return Grid(_rows(levels, weight), scale.squeeze(-1), low.squeeze(-1), _distance(steps, levels))


def q8_grid(weight: torch.Tensor) -> Grid:
    """GGUF's Q8_0: -127..127 times each block's scale, no offset."""
    blocks = _blocks(weight)
    scale = blocks.abs().amax(-1, keepdim=True) / 127
    steps = blocks / torch.where(scale == 0, 1.0, scale)
    levels = steps.round().clamp(-127, 127)
    return Grid(_rows(levels, weight), scale.squeeze(-1), torch.zeros_like(scale.squeeze(-1)), _distance(steps, levels))


def _blocks(weight: torch.Tensor) -> torch.Tensor:
    out_features, in_features = weight.shape
    return weight.detach().float().reshape(out_features, in_features // GROUP, GROUP)


def _rows(levels: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return levels.to(torch.int32).reshape(weight.shape)


def _distance(steps: torch.Tensor, levels: torch.Tensor) -> float:
    return float((steps - levels).abs().max()) if steps.numel() else 0.0


def supports(weight: torch.Tensor) -> bool:
    """The kernel packs 16 output rows at a time and groups the input in blocks of GROUP."""
    out_features, in_features = weight.shape
    return out_features % 16 == 0 and in_features % GROUP == 0 and in_features > 0


def _pack(levels: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's operands: levels 0..15 packed two a byte, and per block (scale, zero), where it
    computes a weight as (level - 8) * scale + zero."""
    packed = torch._convert_weight_to_int4pack_for_cpu(levels.contiguous(), 1)
    scales_and_zeros = torch.stack([scale, zero], -1).transpose(0, 1).contiguous().to(torch.bfloat16)
    return packed, scales_and_zeros


class Int4Linear(nn.Module):
    """A linear layer on the Q4_1 grid: 5 bits read a weight (4, and a scale and zero per 32) where
    float32 reads 32."""

    packed: torch.Tensor
    scales_and_zeros: torch.Tensor
    dense: torch.Tensor  # the same weights for prompts: bfloat16, or float32 where bfloat16 is emulated
    bias: torch.Tensor | None

    def __init__(self, linear: nn.Linear, grid: Grid, dense_dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        self.out_features = linear.out_features
        packed, scales_and_zeros = _pack(grid.levels, grid.scale, grid.offset + 8 * grid.scale)
        if dense_dtype == torch.float32 and grid.off_grid <= ON_GRID and linear.weight.dtype == torch.float32:
            dense = linear.weight.detach()  # already the grid's values: shared with the checkpoint, no copy
        else:
            dequantized = grid.levels.reshape(*grid.scale.shape, GROUP) * grid.scale[..., None] + grid.offset[..., None]
            dense = dequantized.reshape(grid.levels.shape).to(dense_dtype)
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scales_and_zeros", scales_and_zeros, persistent=False)
        self.register_buffer("dense", dense, persistent=False)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if rows.shape[0] > DENSE_ROWS:
            y = F.linear(rows.to(self.dense.dtype), self.dense)
        else:
            y = torch._weight_int4pack_mm_for_cpu(rows.to(torch.bfloat16), self.packed, GROUP, self.scales_and_zeros)
        y = y.to(x.dtype).view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


class Int8Head(nn.Module):
    """The output layer on the Q8_0 grid, as two 4-bit halves through the same kernel in one call.

    A level -127..127 is 16 * high + low with high in -8..7 and low in 0..15; the kernel gives both
    halves' products side by side and their sum is the layer's. 10 bits read a weight, where
    bfloat16 would read 16 of the model's largest matrix every token (and lose the levels' last bits).
    """

    packed: torch.Tensor
    scales_and_zeros: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, linear: nn.Linear, grid: Grid) -> None:
        super().__init__()
        self.out_features = linear.out_features
        high = torch.div(grid.levels, 16, rounding_mode="floor")
        low = grid.levels - 16 * high
        scale = grid.scale
        packed, scales_and_zeros = _pack(
            torch.cat([high + 8, low]), torch.cat([16 * scale, scale]), torch.cat([torch.zeros_like(scale), 8 * scale])
        )
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scales_and_zeros", scales_and_zeros, persistent=False)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
        halves = torch._weight_int4pack_mm_for_cpu(rows, self.packed, GROUP, self.scales_and_zeros).to(x.dtype)
        y = (halves[:, : self.out_features] + halves[:, self.out_features :]).view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


def to_int4(model: nn.Module, *, only_if_on_grid: bool) -> bool:
    """Convert `model` (a float causal LM from transformers, on the CPU) in place; whether it was.

    With `only_if_on_grid` a model whose weights are not already on the grids (a trained checkpoint)
    is left exactly as it was and this returns False: rounding it to 4 bits would change what it
    learned. Without, every weight is rounded to its grid. Raises Int4Unsupported for a layer shape
    the kernel cannot take; the model is then untouched either way.
    """
    head = model.get_output_embeddings()  # type: ignore[operator]
    dense_dtype = torch.bfloat16 if native_bfloat16() else torch.float32
    swaps: list[tuple[nn.Module, str, nn.Module]] = []
    # Converted one layer at a time, so a trained checkpoint is refused at its first layer and the
    # int32 levels of the whole model are never held at once.
    for parent in model.modules():
        for name, child in parent.named_children():
            if not isinstance(child, nn.Linear):
                continue
            if not supports(child.weight):
                raise Int4Unsupported(
                    f"{name} is {child.out_features}×{child.in_features}: int4 needs outputs in 16s, inputs in {GROUP}s"
                )
            grid = q8_grid(child.weight) if child is head else q4_grid(child.weight)
            if only_if_on_grid and grid.off_grid > ON_GRID:
                return False
            swaps.append(
                (parent, name, Int8Head(child, grid) if child is head else Int4Linear(child, grid, dense_dtype))
            )
    for parent, name, replacement in swaps:
        setattr(parent, name, replacement)
    if swaps:
        _decode_on_one_thread(model)
    return bool(swaps)


def _decode_on_one_thread(model: nn.Module) -> None:
    """Run each forward of a few tokens (a decoding step) on one thread, then restore the count.

    A step of the int4 model is ~200 kernels of ~20 µs each: waking a second thread for each costs
    more than it saves, and where cores are shared (other rollouts, their sandboxes) the woken
    thread also waits for a core while the kernel waits for it. On 2 cores, one thread against two:
    59 against 38 tokens/s on a short chat idle, 32 against 17 under load 8-16; 31 against 22 on the
    agent's first step idle. A prompt's products are compute-bound and keep the process's threads.
    (float32 gains 7 % from the same: its products are large enough to share.)
    """
    saved: list[int] = []

    def before(_module: nn.Module, _args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        ids = kwargs.get("input_ids")
        if isinstance(ids, torch.Tensor) and ids.numel() <= DENSE_ROWS:
            saved.append(torch.get_num_threads())
            torch.set_num_threads(1)

    def after(_module: nn.Module, _args: tuple[object, ...], _kwargs: dict[str, object], _out: object) -> None:
        if saved:
            torch.set_num_threads(saved.pop())

    model.register_forward_pre_hook(before, with_kwargs=True)
    model.register_forward_hook(after, with_kwargs=True, always_call=True)
