"""FlexAttention's interface on attn's kernels: ``flex_attention`` and
``create_block_mask``, with PyTorch's signatures and semantics
(``torch.nn.attention.flex_attention``), so that switching is an import
change:

    from attn import flex_attention, create_block_mask

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()

    def document(b, h, q_idx, kv_idx):
        return doc_id[q_idx] == doc_id[kv_idx]

    mask = create_block_mask(document, None, None, S, S)
    out = flex_attention(q, k, v, score_mod=alibi, block_mask=mask)

A ``score_mod`` or ``mask_mod`` is ordinary Python on 0-d tensors. It is
traced (run once on traced arguments, whose operators and torch functions
write MLIR) into the op's ``score_mod`` and
``mask_mod`` regions (docs/spec.md, "Score and mask modifiers"), which the
compiler fuses into the kernel: the scores are never materialized. Tensors
the function closes over (bias tables, document ids, per-head slopes) become
the kernel's captured tensors, read at the traced indices. The kernel is
cached by the traced structure and the captured tensors' element types and
ranks: a new closure value of the same kind (another bias table, other
document ids) or a new sequence length runs the same kernel.

What a modifier may use: + - * / // % ** (a constant exponent), unary -,
abs, comparisons, & | ^ ~, torch.where, torch.clamp / clip, minimum,
maximum, exp, exp2, log, log2, tanh, sigmoid, sqrt, rsqrt, floor, ceil,
conversions (.float(), .int(), .long(), .bool(), .to(dtype)), constants
made like an argument (``b.new_ones((), dtype=torch.bool)`` as PyTorch's
``noop_mask`` writes it, ``torch.zeros_like``, ``torch.full_like``), and
indexing a captured tensor by traced integers (``table[h, bucket]``).
Anything else (Python control flow on the arguments, other functions) is an
attn.Error that names the construct.

Where attn differs from PyTorch: integer division or modulo by zero gives 0
(PyTorch raises); an out-of-range index into a captured tensor is clamped
to the nearest element (PyTorch raises, or wraps a negative one).

The block mask's table goes to the kernel as one more captured tensor
(``attn.block_mask``): the forward skips the key blocks it leaves out and
evaluates ``mask_mod`` in the others. Conjuncts of ``mask_mod`` that bound
``kv_idx - q_idx`` (causal, windows) become the kernel's band attributes.
"""

from __future__ import annotations

import collections
import functools
import math
import operator
import re
import struct
import types
from typing import Callable, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from . import _core

Error = _core.Error

def noop_mask(b, h, q_idx, kv_idx):
    """A mask_mod that keeps everything (FlexAttention's noop_mask)."""
    return q_idx >= 0  # True, as a tensor of the arguments' kind


def _combined(name: str, mask_mods, combine, start: bool) -> Callable:
    """A mask_mod folding `mask_mods`' results with `combine` from `start`."""
    if not all(callable(m) for m in mask_mods):
        raise Error(f"{name}: every argument must be a mask_mod (a callable)")

    def mask_mod(b, h, q_idx, kv_idx):
        result = start
        for each in mask_mods:
            result = combine(each(b, h, q_idx, kv_idx), result)
        return result

    return mask_mod


def and_masks(*mask_mods: Callable) -> Callable:
    """A mask_mod keeping what every one of `mask_mods` keeps."""
    return _combined("and_masks", mask_mods, operator.and_, True)


def or_masks(*mask_mods: Callable) -> Callable:
    """A mask_mod keeping what any one of `mask_mods` keeps."""
    return _combined("or_masks", mask_mods, operator.or_, False)


# ---------------------------------------------------------------------------
# Tracing a modifier into MLIR
# ---------------------------------------------------------------------------

_F32, _INDEX, _I1 = "f32", "index", "i1"


class _Value:
    """An SSA value of the region being written (of kind f32, index or i1),
    and what a modifier's arguments and results are while it is traced:
    Python's operators, the torch functions (through __torch_function__) and
    the tensor methods on it write the region's MLIR as they run."""

    __slots__ = ("name", "kind", "region")
    __hash__ = object.__hash__

    def __init__(self, name: str, kind: str, region: "_Region" = None):
        self.name, self.kind, self.region = name, kind, region

    # What code that inspects its arguments sees: FlexAttention's 0-d
    # tensors (the score float32, the indices int32) on the CPU.
    dtype = property(lambda self: {_F32: torch.float32, _I1: torch.bool}.get(
        self.kind, torch.int32))
    shape = property(lambda self: torch.Size([]))
    ndim = property(lambda self: 0)
    device = property(lambda self: torch.device("cpu"))

    def dim(self) -> int:
        return 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        region = next(a.region for a in _flatten((args, kwargs)) if isinstance(a, _Value))
        return region.call(func, args, kwargs)

    def __getattr__(self, name: str):
        # Tensor methods: x.abs(), x.clamp(min=0), x.float(), x.to(dtype)...
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.region.apply(name, (self,) + args, kwargs)

    def __bool__(self):
        raise Error(f"{self.region.site}: a modifier cannot branch on its arguments (Python "
                    "if/and/or/not, bool()): they are traced, not known; use torch.where, "
                    "&, | and ~")

    def _number(self, *_):
        raise Error(f"{self.region.site}: cannot be traced: a traced value cannot become a "
                    "Python number (float(), int(), math.* functions, list indices); use the "
                    "torch functions")

    __float__ = __int__ = __index__ = __complex__ = _number

    def __iter__(self):
        raise Error(f"{self.region.site}: a traced value is one number per score, not a "
                    "sequence")


def _binary(name: str, reflected: bool = False):
    if reflected:
        return lambda self, other: self.region.apply(name, (other, self), {})
    return lambda self, other: self.region.apply(name, (self, other), {})


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor"):
    setattr(_Value, f"__{_name}__", _binary(_name))
    setattr(_Value, f"__r{_name}__", _binary(_name, reflected=True))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(_Value, f"__{_name}__", _binary(_name))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(_Value, f"__{_name}__",
            (lambda op: lambda self: self.region.apply(op, (self,), {}))(_name))


def _flatten(tree):
    if isinstance(tree, (list, tuple)):
        for item in tree:
            yield from _flatten(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _flatten(item)
    else:
        yield tree


class _View:
    """A captured tensor indexed by fewer indices than its rank so far
    (``table[h]`` of ``table[h][bucket]``)."""

    __slots__ = ("capture", "indices", "region")

    def __init__(self, capture: int, indices: list, region: "_Region" = None):
        self.capture, self.indices, self.region = capture, indices, region

    def __getitem__(self, index):
        return self.region.index(self, index, self.region.site)


class _Captures:
    """The captured tensors of one call (shared by its score_mod and
    mask_mod), in the order of the op's captures(...)."""

    def __init__(self):
        self.tensors: List[Tensor] = []
        self.types: List[str] = []
        self._index: dict = {}
        self._held: List[Tensor] = []  # the caller's: each id() unique while tracing

    def add(self, tensor: Tensor, where: str) -> int:
        found = self._index.get(id(tensor))
        if found is not None:
            return found
        if tensor.dim() > 4:
            raise Error(f"{where}: a captured tensor has {tensor.dim()} dims; at most 4 are supported")
        if tensor.is_complex():
            raise Error(f"{where}: a captured tensor is complex ({tensor.dtype})")
        data = _capture_data(tensor)
        element = {torch.float32: "f32", torch.int64: "i64", torch.bool: "i8"}.get(
            data.dtype, "i32")
        index = len(self.tensors)
        if index >= 8:
            raise Error(f"{where}: more than 8 captured tensors (the kernels take at most 8)")
        self._index[id(tensor)] = index
        self._held.append(tensor)
        self.tensors.append(data)
        self.types.append("tensor<" + "?x" * data.dim() + element + ">")
        return index

    def rank(self, index: int) -> int:
        return self.tensors[index].dim()

    def element(self, index: int) -> str:
        return self.types[index].rsplit("x", 1)[-1].rstrip(">")


_SUPPORTED = (
    "+ - * / // % ** (constant exponent), unary -, abs, comparisons, & | ^ ~, "
    "torch.where, clamp/clip, minimum, maximum, exp, exp2, log, log2, tanh, "
    "sigmoid, sqrt, rsqrt, floor, ceil, .float()/.int()/.long()/.bool()/.to(dtype), "
    "constants made like a value (.new_ones(()), zeros_like, full_like, ...), "
    "and indexing a captured tensor by traced integers"
)


#: Constants made like a traced value (Region.filled).
_FILLED = ("new_ones", "new_zeros", "new_full", "new_tensor", "ones_like", "zeros_like",
           "full_like")
_UNARY = ("exp", "exp2", "log", "log2", "tanh", "sqrt", "rsqrt", "floor", "ceil", "sigmoid")
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
            "greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le",
            "not_equal": "ne"}
#: Dunder and alias names as the operation they are.
_ALIASES = {"truediv": "div", "true_divide": "div", "divide": "div", "and": "bitwise_and",
            "or": "bitwise_or", "xor": "bitwise_xor", "floordiv": "floor_divide",
            "mod": "remainder", "subtract": "sub", "multiply": "mul", "negative": "neg",
            "invert": "bitwise_not", "clip": "clamp", "fmin": "minimum", "fmax": "maximum"}


class _Region:
    """Writes one region (score_mod or mask_mod) from a traced graph."""

    def __init__(self, role: str, captures: _Captures, where: str):
        self.role = role
        self.site = where  # the function, for messages
        self.captures = captures
        self.lines: List[str] = []
        self.count = 0
        self._constants: dict = {}

    # -- values -------------------------------------------------------------

    def emit(self, text: str, kind: str) -> _Value:
        name = f"%v{self.count}"
        self.count += 1
        self.lines.append(f"    {name} = {text}")
        return _Value(name, kind, self)

    def constant(self, value, kind: str) -> _Value:
        key = (kind, repr(value))
        found = self._constants.get(key)
        if found is not None:
            return found
        if kind == _F32:
            bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
            text = f"arith.constant 0x{bits:08X} : f32"
        elif kind == _INDEX:
            if not -(2**63) <= int(value) < 2**63:
                raise Error(f"{self.role}: the integer {value} does not fit in 64 bits")
            text = f"arith.constant {int(value)} : index"
        else:
            text = f"arith.constant {'true' if value else 'false'}"
        found = self.emit(text, kind)
        self._constants[key] = found
        return found

    def kind_of(self, x) -> str:
        if isinstance(x, _Value):
            return x.kind
        if isinstance(x, bool):
            return _I1
        if isinstance(x, int):
            return _INDEX
        if isinstance(x, float):
            return _F32
        raise Error(f"{self.role}: {self._what(x)} cannot be used as a value here")

    def _what(self, x) -> str:
        if isinstance(x, _View):
            return ("a captured tensor indexed by fewer indices than its "
                    f"{self.captures.rank(x.capture)} dims")
        if isinstance(x, Tensor):
            return f"a tensor of shape {list(x.shape)} (index it to read one element)"
        if isinstance(x, _Value):
            return {_F32: "a float", _INDEX: "an integer", _I1: "a bool"}.get(x.kind, x.kind)
        return f"{type(x).__name__} {x!r}"

    def as_kind(self, x, kind: str) -> _Value:
        if not isinstance(x, _Value):
            self.kind_of(x)  # refuses what is no number
            if kind == _I1:
                return self.constant(bool(x), _I1)
            if kind == _INDEX:
                if isinstance(x, float):
                    raise Error(f"{self.role}: the float {x} is used where an integer is needed")
                return self.constant(int(x), _INDEX)
            return self.constant(float(x), _F32)
        if x.kind == kind:
            return x
        if kind == _F32:
            if x.kind == _I1:
                return self.emit(f"arith.uitofp {x.name} : i1 to f32", _F32)
            wide = self.emit(f"arith.index_cast {x.name} : index to i64", "i64")
            return self.emit(f"arith.sitofp {wide.name} : i64 to f32", _F32)
        if kind == _INDEX:
            if x.kind == _I1:
                wide = self.emit(f"arith.extui {x.name} : i1 to i64", "i64")
                return self.emit(f"arith.index_cast {wide.name} : i64 to index", _INDEX)
            raise Error(f"{self.role}: a float is used where an integer is needed "
                        "(convert it with .long() or .int())")
        # to i1: PyTorch's bool(x) is x != 0
        zero = self.constant(0.0 if x.kind == _F32 else 0, x.kind)
        if x.kind == _F32:
            return self.emit(f"arith.cmpf une, {x.name}, {zero.name} : f32", _I1)
        return self.emit(f"arith.cmpi ne, {x.name}, {zero.name} : index", _I1)

    def common(self, *xs, bools: bool = False) -> str:
        """The kind PyTorch's promotion gives `xs`: f32 if any is a float,
        else index (i1 only when all are bool and `bools`)."""
        kinds = [self.kind_of(x) for x in xs]
        if _F32 in kinds:
            return _F32
        if bools and all(k == _I1 for k in kinds):
            return _I1
        return _INDEX

    # -- operations ---------------------------------------------------------

    def arith(self, op: str, a, b):
        if not isinstance(a, _Value) and not isinstance(b, _Value):
            return {"add": operator.add, "sub": operator.sub, "mul": operator.mul}[op](a, b)
        kind = self.common(a, b)
        x, y = self.as_kind(a, kind), self.as_kind(b, kind)
        suffix = "f" if kind == _F32 else "i"
        return self.emit(f"arith.{op}{suffix} {x.name}, {y.name} : {kind}", kind)

    def truediv(self, a, b):
        x, y = self.as_kind(a, _F32), self.as_kind(b, _F32)
        return self.emit(f"arith.divf {x.name}, {y.name} : f32", _F32)

    def floordiv(self, a, b, modulo: bool):
        kind = self.common(a, b)
        if kind == _F32:
            x, y = self.as_kind(a, _F32), self.as_kind(b, _F32)
            quotient = self.emit(f"arith.divf {x.name}, {y.name} : f32", _F32)
            floor = self.emit(f"math.floor {quotient.name} : f32", _F32)
            if not modulo:
                return floor
            product = self.emit(f"arith.mulf {floor.name}, {y.name} : f32", _F32)
            return self.emit(f"arith.subf {x.name}, {product.name} : f32", _F32)
        x = self.as_kind(a, _INDEX)
        zero = self.constant(0, _INDEX)
        if not isinstance(b, _Value) and int(b) == 0:
            raise Error(f"{self.role}: integer division or modulo by zero")
        if isinstance(b, _Value):
            y = self.as_kind(b, _INDEX)
            # No trap on a zero divisor: divide by 1 and give 0 there.
            is_zero = self.emit(f"arith.cmpi eq, {y.name}, {zero.name} : index", _I1)
            one = self.constant(1, _INDEX)
            divisor = self.emit(f"arith.select {is_zero.name}, {one.name}, {y.name} : index",
                                _INDEX)
        else:
            is_zero, divisor = None, self.constant(int(b), _INDEX)
        result = self.emit(f"arith.floordivsi {x.name}, {divisor.name} : index", _INDEX)
        if modulo:
            product = self.emit(f"arith.muli {result.name}, {divisor.name} : index", _INDEX)
            result = self.emit(f"arith.subi {x.name}, {product.name} : index", _INDEX)
        if is_zero is not None:
            result = self.emit(
                f"arith.select {is_zero.name}, {zero.name}, {result.name} : index", _INDEX)
        return result

    def power(self, a, b):
        if isinstance(b, _Value) or isinstance(b, bool) or not isinstance(b, (int, float)):
            raise Error(f"{self.role}: ** takes a constant exponent (a Python number)")
        kind = self.common(a, b)
        if float(b) == 0.5:
            return self.unary("sqrt", a)
        if float(b) != int(b) or not 0 <= int(b) <= 16:
            if kind != _F32:
                raise Error(f"{self.role}: an integer ** takes an exponent from 0 to 16")
            x = self.as_kind(a, _F32)
            y = self.constant(float(b), _F32)
            return self.emit(f"math.powf {x.name}, {y.name} : f32", _F32)
        x = self.as_kind(a, kind)
        result = self.constant(1.0 if kind == _F32 else 1, kind)
        suffix = "f" if kind == _F32 else "i"
        for _ in range(int(b)):
            result = self.emit(f"arith.mul{suffix} {result.name}, {x.name} : {kind}", kind)
        return result

    def negate(self, a):
        kind = self.common(a)
        if kind == _F32:
            return self.emit(f"arith.negf {self.as_kind(a, _F32).name} : f32", _F32)
        return self.arith("sub", 0, self.as_kind(a, _INDEX))

    def absolute(self, a):
        kind = self.common(a)
        if kind == _F32:
            return self.emit(f"math.absf {self.as_kind(a, _F32).name} : f32", _F32)
        x = self.as_kind(a, _INDEX)
        minus = self.arith("sub", 0, x)
        return self.emit(f"arith.maxsi {x.name}, {minus.name} : index", _INDEX)

    def compare(self, predicate: str, a, b):
        kind = self.common(a, b, bools=True)
        x, y = self.as_kind(a, kind), self.as_kind(b, kind)
        if kind == _F32:
            float_predicate = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole",
                               "gt": "ogt", "ge": "oge"}[predicate]
            return self.emit(f"arith.cmpf {float_predicate}, {x.name}, {y.name} : f32", _I1)
        if kind == _I1 and predicate not in ("eq", "ne"):
            x, y = self.as_kind(x, _INDEX), self.as_kind(y, _INDEX)
            kind = _INDEX
        signed = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt",
                  "ge": "sge"}[predicate]
        return self.emit(f"arith.cmpi {signed}, {x.name}, {y.name} : {kind}", _I1)

    def bitwise(self, op: str, a, b):
        kind = self.common(a, b, bools=True)
        if kind == _F32:
            raise Error(f"{self.role}: & | ^ take bools or integers, not floats")
        x, y = self.as_kind(a, kind), self.as_kind(b, kind)
        return self.emit(f"arith.{op} {x.name}, {y.name} : {kind}", kind)

    def invert(self, a):
        kind = self.common(a, bools=True)
        if kind == _F32:
            raise Error(f"{self.role}: ~ takes a bool or an integer, not a float")
        ones = self.constant(True if kind == _I1 else -1, kind)
        x = self.as_kind(a, kind)
        return self.emit(f"arith.xori {x.name}, {ones.name} : {kind}", kind)

    def logical_not(self, a):
        return self.invert(self.as_kind(a, _I1))

    def where(self, condition, a, b):
        c = self.as_kind(condition, _I1) if self.kind_of(condition) == _I1 else None
        if c is None:
            raise Error(f"{self.role}: torch.where's condition must be a bool")
        kind = self.common(a, b, bools=True)
        x, y = self.as_kind(a, kind), self.as_kind(b, kind)
        return self.emit(f"arith.select {c.name}, {x.name}, {y.name} : {kind}", kind)

    def extremum(self, which: str, a, b):
        kind = self.common(a, b)
        x, y = self.as_kind(a, kind), self.as_kind(b, kind)
        op = {("max", _F32): "maximumf", ("min", _F32): "minimumf",
              ("max", _INDEX): "maxsi", ("min", _INDEX): "minsi"}[(which, kind)]
        return self.emit(f"arith.{op} {x.name}, {y.name} : {kind}", kind)

    def clamp(self, a, low=None, high=None):
        result = a
        if low is not None:
            result = self.extremum("max", result, low)
        if high is not None:
            result = self.extremum("min", result, high)
        return result if isinstance(result, _Value) else self.as_kind(result, self.kind_of(a))

    def unary(self, name: str, a):
        x = self.as_kind(a, _F32)
        if name == "sigmoid":
            minus = self.emit(f"arith.negf {x.name} : f32", _F32)
            e = self.emit(f"math.exp {minus.name} : f32", _F32)
            one = self.constant(1.0, _F32)
            denominator = self.emit(f"arith.addf {one.name}, {e.name} : f32", _F32)
            return self.emit(f"arith.divf {one.name}, {denominator.name} : f32", _F32)
        return self.emit(f"math.{name} {x.name} : f32", _F32)

    def convert(self, a, dtype):
        if dtype is torch.bool:
            return self.as_kind(a, _I1)
        if dtype.is_floating_point:
            return self.as_kind(a, _F32)
        if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            if self.kind_of(a) == _F32:  # truncation toward zero, as PyTorch's
                x = self.as_kind(a, _F32)
                wide = self.emit(f"arith.fptosi {x.name} : f32 to i64", "i64")
                return self.emit(f"arith.index_cast {wide.name} : i64 to index", _INDEX)
            return self.as_kind(a, _INDEX)
        raise Error(f"{self.role}: conversion to {dtype} is not supported")

    def index(self, base, indices, where: str):
        if isinstance(base, Tensor):
            view = _View(self.captures.add(base, where), [], self)
        elif isinstance(base, _View):
            view = _View(base.capture, list(base.indices), self)
        else:
            raise Error(f"{self.role}: only captured tensors can be indexed, not {self._what(base)}")
        if not isinstance(indices, tuple):
            indices = (indices,)
        for i in indices:
            if isinstance(i, _Value) and i.kind != _F32:
                view.indices.append(self.as_kind(i, _INDEX))
            elif isinstance(i, int) and not isinstance(i, bool) and i >= 0:
                view.indices.append(self.constant(i, _INDEX))
            elif isinstance(i, int) and not isinstance(i, bool):
                raise Error(f"{self.role}: a negative constant index ({i}) into a captured tensor")
            else:
                raise Error(f"{self.role}: a captured tensor is indexed by {self._what(i)}; "
                            "only integers (the index arguments, arithmetic on them, or "
                            "values read from integer tensors) can index it")
        rank = self.captures.rank(view.capture)
        if len(view.indices) > rank:
            raise Error(f"{self.role}: a captured tensor of {rank} dims is indexed by "
                        f"{len(view.indices)} indices")
        if len(view.indices) < rank:
            return view
        element = self.captures.element(view.capture)
        names = ", ".join(v.name for v in view.indices)
        read = self.emit(f"attn.captured {view.capture} [{names}] : {element}", element)
        if element == _F32:
            return read
        if element == "i8":  # a bool tensor's bytes: PyTorch's bool(x) is x != 0
            zero = self.emit(f"arith.constant 0 : {element}", element)
            return self.emit(f"arith.cmpi ne, {read.name}, {zero.name} : {element}", _I1)
        return self.emit(f"arith.index_cast {read.name} : {element} to index", _INDEX)

    # -- what a traced function calls ------------------------------------------

    def call(self, func, args, kwargs):
        """A torch function or Tensor method that __torch_function__ hands over
        (torch.where, Tensor.__getitem__ of a held tensor, Tensor.__mul__ of a
        held 0-d tensor...)."""
        name = getattr(func, "__name__", None)
        if name is None:
            raise Error(f"{self.site}: {func!r} is not supported in a modifier "
                        f"(supported: {_SUPPORTED})")
        if name.startswith("__r") and name.endswith("__") and len(args) == 2:
            # Tensor.__rsub__(t, x) is x - t.
            return self.apply(name[3:-2], (args[1], args[0]), kwargs, func)
        return self.apply(name.strip("_"), args, kwargs, func)

    def filled(self, name: str, args, kwargs):
        """A constant made like a traced value (x.new_ones((), dtype=...),
        torch.zeros_like(x), torch.full_like(x, v), ...: PyTorch's
        noop_mask is one), of its kind or the dtype asked for."""
        like, rest = args[0], list(args[1:])
        if name.startswith("new_") and name != "new_tensor":
            size = kwargs.get("size", rest.pop(0) if rest else None)
            if size is None or tuple(size) != ():
                raise Error(f"{self.site}: .{name}() makes a value per score only with "
                            "size ()")
        fill = {"ones": 1, "zeros": 0}.get(name.replace("new_", "").replace("_like", ""))
        if fill is None:
            key = "data" if name == "new_tensor" else "fill_value"
            fill = kwargs.get(key, rest.pop(0) if rest else None)
        if isinstance(fill, Tensor) and fill.dim() == 0:
            fill = fill.item()
        if not isinstance(fill, (bool, int, float)):
            raise Error(f"{self.site}: .{name}()'s value must be a number")
        dtype = kwargs.get("dtype")
        kind = self.kind_of(like) if dtype is None else (
            _I1 if dtype == torch.bool else _F32 if dtype.is_floating_point else _INDEX)
        value = bool(fill) if kind == _I1 else float(fill) if kind == _F32 else int(fill)
        return self.constant(value, kind)

    def apply(self, name: str, args, kwargs, func=None):
        """One operation of a modifier on traced values, held tensors and
        numbers: its MLIR in this region, or the error that names it."""
        where = self.site
        name = _ALIASES.get(name, name)
        if name == "getitem":
            return self.index(args[0], args[1], where)
        # A 0-d tensor the function holds (or computed from what it holds, like
        # SLOPES[-1]) is a captured value: a new value does not recompile.
        def scalar(a):
            return self.index(a, (0,), where) if isinstance(a, Tensor) and a.dim() == 0 else a

        args = tuple(scalar(a) for a in args)
        kwargs = {k: scalar(a) for k, a in kwargs.items()}
        if name in ("add", "sub", "mul") and not kwargs:
            return self.arith(name, *args)
        if name == "div" and not kwargs:
            return self.truediv(*args)
        if name in ("floor_divide", "remainder") and not kwargs:
            return self.floordiv(*args, modulo=name == "remainder")
        if name == "pow" and not kwargs:
            return self.power(*args)
        if name == "neg":
            return self.negate(*args)
        if name == "pos":
            return args[0]
        if name == "abs":
            return self.absolute(*args)
        if name in _COMPARE and not kwargs:
            return self.compare(_COMPARE[name], *args)
        for op, mlir in (("and", "andi"), ("or", "ori"), ("xor", "xori")):
            if name == f"bitwise_{op}":
                return self.bitwise(mlir, *args)
            if name == f"logical_{op}":
                return self.bitwise(mlir, *(self.as_kind(a, _I1) for a in args))
        if name == "bitwise_not":
            return self.invert(*args)
        if name == "logical_not":
            return self.logical_not(*args)
        if name == "where" and len(args) + len(kwargs) == 3:
            values = list(args) + [kwargs[k] for k in ("input", "other") if k in kwargs]
            return self.where(*values)
        if name == "clamp":
            low = kwargs.get("min", args[1] if len(args) > 1 else None)
            high = kwargs.get("max", args[2] if len(args) > 2 else None)
            if isinstance(low, Tensor) or isinstance(high, Tensor):
                raise Error(f"{where}: clamp's bounds must be numbers or traced values")
            return self.clamp(args[0], low, high)
        if name in ("minimum", "maximum") and not kwargs:
            return self.extremum("min" if name == "minimum" else "max", *args)
        if name in _UNARY and len(args) == 1 and not kwargs:
            return self.unary(name, *args)
        if name == "float":
            return self.convert(args[0], torch.float32)
        if name in ("int", "long"):
            return self.convert(args[0], torch.int64)
        if name == "bool":
            return self.convert(args[0], torch.bool)
        if name in ("to", "type"):
            dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
            if isinstance(dtype, torch.dtype):
                return self.convert(args[0], dtype)
        if name in _FILLED:
            return self.filled(name, args, kwargs)
        if func is not None and getattr(func, "__module__", None) in ("torch", "torch.functional"):
            what = f"torch.{getattr(func, '__name__', name)}"
        else:
            what = f"the tensor method .{name}()" if func is None else f"torch's {name}"
        raise Error(f"{where}: {what} is not supported in a modifier (supported: {_SUPPORTED})")


def _trace(fn: Callable, role: str, captures: _Captures) -> Optional[str]:
    """The region text of `fn` (a score_mod or mask_mod), from running it
    once on traced arguments; None when it is the identity (a score_mod
    returning its score, a mask_mod keeping everything)."""
    if not callable(fn):
        raise Error(f"{role} must be a callable, not {type(fn).__name__}")
    where = f"{role} {getattr(fn, '__qualname__', None) or getattr(fn, '__name__', repr(fn))}"
    names = ["b", "h", "q_idx", "kv_idx"]
    kinds = [_INDEX] * 4
    if role == "score_mod":
        names, kinds = ["score"] + names, [_F32] + kinds
    region = _Region(role, captures, where)
    arguments = [_Value(f"%{name}", kind, region) for name, kind in zip(names, kinds)]
    try:
        result = fn(*arguments)
    except Error:
        raise
    except Exception as error:  # what the function did with a traced value
        raise Error(f"{where}: cannot be traced ({type(error).__name__}: {error}); "
                    f"supported: {_SUPPORTED}") from None
    if isinstance(result, Tensor):
        # A tensor the function returned as it is (0-d): read it.
        if result.numel() != 1:
            raise Error(f"{where}: returns a tensor of shape {list(result.shape)}, "
                        "not a value per score")
        result = region.index(result.reshape(1), (0,), where)
    if isinstance(result, _View) or not isinstance(result, (_Value, bool, int, float)):
        raise Error(f"{where}: returns {region._what(result)}, not a value per score")
    if role == "score_mod":
        if result is arguments[0]:
            return None
        value = region.as_kind(result, _F32)
        yield_type = "f32"
    else:
        if region.kind_of(result) != _I1:
            raise Error(f"{where}: must return a bool (True = attend), "
                        f"not {'a float' if region.kind_of(result) == _F32 else 'an integer'}")
        if result is True:
            return None
        value = region.as_kind(result, _I1)
        yield_type = "i1"
    block = ", ".join(f"{a.name}: {a.kind}" for a in arguments)
    body = "\n".join(region.lines)
    return (f"{role} {{\n  ^bb0({block}):\n{body}\n"
            f"    attn.yield {value.name} : {yield_type}\n  }}")


#: What tracing may read and what a trace is keyed by (_walk): values
#: compared as they are (these exact types; a subclass may hash otherwise).
_PLAIN = frozenset({bool, int, float, complex, str, bytes, type(None), type(Ellipsis),
                    torch.dtype, torch.device, torch.Size})

#: Tensor methods and properties that tell a tensor's metadata, not its
#: values (what the tracer itself asks of the tensors it captures).
_METADATA = frozenset({"dim", "ndimension", "numel", "nelement", "size", "stride",
                       "storage_offset", "element_size", "is_floating_point",
                       "is_complex", "is_signed", "is_contiguous", "get_device", "__len__",
                       "__get__"})

#: Results that carry a tensor's values into Python.
_VALUE_RESULTS = (bool, int, float, complex, str, bytes, list)

#: The most parts a trace's key may have: a modifier that names a large
#: container (a list of a million numbers) is traced at every call instead.
_KEY_PARTS = 4096


class _ValueReads(torch.overrides.TorchFunctionMode):
    """Notes whether a modifier read a held tensor's values while it was
    traced (`if table[0] > 0:`, `.item()`, `torch.equal`, `x in t`): a
    torch function of a tensor whose result is a Python value other than
    metadata (a shape, a dtype)."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if (isinstance(result, _VALUE_RESULTS)
                and getattr(func, "__name__", None) not in _METADATA
                and any(isinstance(a, Tensor) for a in _flatten((args, kwargs)))):
            self.seen = True
        return result


def _global_names(code: types.CodeType) -> set:
    """The names `code` and the functions defined in it may read as globals
    or attributes."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def _trusted(value) -> bool:
    """A function or class of PyTorch or Python itself, which a modifier
    calls or names but does not change."""
    module = getattr(value, "__module__", None) or ""
    return module.split(".")[0] in ("torch", "builtins", "math", "operator", "_operator")


def _walk(value, key: list, tensors: list, ids: dict, seen: dict,
          names: frozenset = frozenset()) -> bool:
    """Appends to `key` what tracing a modifier that reads `value` depends
    on, and to `tensors` the tensors it may capture (each once, in the order
    found); False where that cannot be told (an object whose attributes a
    function may read, a key past _KEY_PARTS), so that the modifier is
    traced at every call. Functions count by their code, closure cells,
    defaults, attributes and the globals their code names (read now: a
    rebound global or cell is seen); a module by the attributes of it that
    the code names (`names`); tensors by their order of appearance, shape,
    dtype, device and requires_grad (the trace reads no values;
    `_ValueReads` notes one that does); other values as they are."""
    if len(key) > _KEY_PARTS:
        return False
    kind = type(value)
    if kind in _PLAIN:
        # (floats also by their text: 0.0 and -0.0 are equal, not the same)
        key.append((kind, value, repr(value) if kind is float else None))
        return True
    if isinstance(value, Tensor):
        first = ids.setdefault(id(value), len(tensors))
        if first == len(tensors):
            tensors.append(value)
        key.append(("tensor", first, tuple(value.shape), value.dtype, value.device,
                    value.requires_grad))
        return True
    if id(value) in seen:  # a function, module or container met before
        key.append(("again", seen[id(value)]))
        return True
    if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType)):
        # math.exp, operator.and_, torch.where; torch.Tensor.abs
        owner = getattr(value, "__self__", None)
        key.append(("builtin", getattr(value, "__module__", None), value.__qualname__))
        return owner is None or isinstance(owner, types.ModuleType)
    if isinstance(value, type) or (isinstance(value, types.FunctionType)
                                   and value.__closure__ is None and _trusted(value)):
        # (a closure, PyTorch's and_masks' say, is walked: its cells differ;
        # a user's class is not known: its attributes may change)
        key.append(("trusted", value.__module__, value.__qualname__))
        return _trusted(value)
    seen[id(value)] = len(seen)
    if isinstance(value, types.ModuleType):
        key.append(("module", value.__name__))
        for name in sorted(names):
            present = hasattr(value, name)
            key.append((name, present))
            if present and not _walk(getattr(value, name), key, tensors, ids, seen, names):
                return False
        return True
    if isinstance(value, (tuple, list)):
        key.append((kind, len(value)))
        return all(_walk(item, key, tensors, ids, seen, names) for item in value)
    if isinstance(value, dict):
        key.append((dict, len(value)))
        return all(_walk(k, key, tensors, ids, seen, names)
                   and _walk(v, key, tensors, ids, seen, names) for k, v in value.items())
    if isinstance(value, functools.partial):
        key.append(("partial",))
        return all(_walk(part, key, tensors, ids, seen, names)
                   for part in (value.func, value.args, value.keywords))
    if not isinstance(value, types.FunctionType):
        return False
    code = value.__code__
    own = frozenset(_global_names(code))
    key.append(("function", code))
    for cell in value.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not yet bound
            key.append(("unbound",))
            continue
        if not _walk(contents, key, tensors, ids, seen, own):
            return False
    if not _walk((value.__defaults__, value.__kwdefaults__, value.__dict__), key, tensors,
                 ids, seen, own):
        return False
    scope = value.__globals__
    for name in sorted(own):
        present = name in scope
        key.append((name, present))
        if present and not _walk(scope[name], key, tensors, ids, seen, own):
            return False
    key.append(("end",))
    return True


#: Recent traces, by what they read (_walk): tracing a score_mod or mask_mod
#: takes about 0.1 ms, which a short call (a decoding step, a small block
#: mask's) would otherwise pay every time.
_TRACES: "collections.OrderedDict[tuple, _Trace]" = collections.OrderedDict()
_TRACES_KEPT = 128


class _Trace(NamedTuple):
    """What tracing a call's modifiers made, less the tensors: the module
    text, and for each capture where `_walk` found its tensor."""

    source: Optional[str]
    positions: List[int]
    score_reads: frozenset


def _capture_data(tensor: Tensor) -> Tensor:
    """A captured tensor as the kernel reads it: floats as f32, bools and
    64-bit integers as they are (bools a byte each, i8 in the kernel), the
    other integers (uint8, int8, int16, int32) as i32, at least 1-D."""
    data = tensor.detach()
    if data.dim() == 0:
        data = data.reshape(1)
    if data.is_floating_point():
        return data.to(torch.float32)
    return data if data.dtype in (torch.int64, torch.bool) else data.to(torch.int32)


class Modifiers:
    """The traced score_mod and mask_mod of a call: the .mlir text the
    kernel is compiled with (its cache key) and the tensors it reads. With
    `block_table` ([B, H, query blocks, key blocks] int32, 0 = no key kept
    there) and `block_size`, the kernel skips the blocks it leaves out.
    Traced once for what the functions read (_walk), then taken from
    _TRACES while that stays the same."""

    def __init__(self, score_mod: Optional[Callable], mask_mod: Optional[Callable],
                 block_table: Optional[Tensor] = None, block_size=None):
        key, tensors, ids = [torch.get_default_dtype()], [], {}
        try:
            known = _walk((block_table, score_mod, mask_mod,
                           None if block_size is None else tuple(block_size)),
                          key, tensors, ids, {})
            key = tuple(key) if known else None
            trace = _TRACES.get(key) if key is not None else None
        except (RecursionError, TypeError):  # (something unhashable inside)
            key = trace = None
        if trace is not None:
            try:
                _TRACES.move_to_end(key)
            except KeyError:  # (another thread's call dropped it)
                pass
            self._held = [tensors[p] for p in trace.positions]
            self._captures = None
        else:
            reads = _ValueReads()
            with reads:
                trace, captures = self._trace(score_mod, mask_mod, block_table, block_size)
            self._held, self._captures = captures._held, captures.tensors
            positions = [ids.get(id(t)) for t in self._held]
            if key is not None and not reads.seen and None not in positions:
                _TRACES[key] = trace._replace(positions=positions)
                while len(_TRACES) > _TRACES_KEPT:
                    try:
                        _TRACES.popitem(last=False)
                    except KeyError:
                        break
        self.source, self.score_reads = trace.source, trace.score_reads
        self.bias_dims = _bias_dims(self.source, len(self._held))
        # The caller's tensors that require grad (a trained bias table),
        # which the score_mod reads: their gradient is recomputed.
        self.trained = [t for t in self._held if t.requires_grad]
        self.score_mod = score_mod

    @property
    def captures(self) -> List[Tensor]:
        """The captured tensors as the kernel reads them (_capture_data):
        made at first use, so that a call that takes another path (a bias
        as a mask) converts no bf16 table to f32."""
        if self._captures is None:
            self._captures = [_capture_data(t) for t in self._held]
        return self._captures

    @staticmethod
    def _trace(score_mod, mask_mod, block_table, block_size):
        """(_Trace, _Captures) of tracing the modifiers now."""
        captures = _Captures()
        regions = []
        if score_mod is not None:
            text = _trace(score_mod, "score_mod", captures)
            if text:
                regions.append(text)
        if mask_mod is not None:
            text = _trace(mask_mod, "mask_mod", captures)
            if text:
                regions.append(text)
        if block_table is not None and any(r.startswith("mask_mod") for r in regions):
            index = captures._index.get(id(block_table))
            if index is None:  # (a mask_mod that reads the table has it already)
                if len(captures.tensors) >= 8:
                    raise Error("the modifiers capture 8 tensors: no room for the block "
                                "mask's table (the kernels take at most 8)")
                index = len(captures.tensors)
                captures._index[id(block_table)] = index
                captures._held.append(block_table)
                captures.tensors.append(block_table)
                captures.types.append("tensor<?x?x?x?xi32>")
            regions.append(f"{{attn.block_mask = array<i64: {index}, {block_size[0]}, "
                           f"{block_size[1]}>}}")
        source = _module_text(regions, captures.types) if regions else None
        # The captures the score_mod reads (those a gradient reaches).
        score_reads = frozenset(_score_mod_reads(source)) if source else frozenset()
        return _Trace(source, [], score_reads), captures

    def differentiated(self) -> List[int]:
        """The captures whose gradient the backward computes: the caller's
        tensors that require grad and that the score_mod reads (the
        mask_mod is not differentiated)."""
        return [n for n, held in enumerate(self._held)
                if held.requires_grad and n in self.score_reads]

    def trained_captures(self) -> List[Tensor]:
        """The captures with each differentiated one as an f32 view of the
        caller's tensor (autograd reaches it through the operator, whose
        backward kernel computes its gradient); the others as traced."""
        tensors = list(self.captures)
        for n in self.differentiated():
            tensors[n] = self._held[n].reshape(tensors[n].shape).to(torch.float32)
        return tensors


@torch.compiler.disable
def _traced(score_mod, block_mask, device=None) -> Modifiers:
    """The Modifiers of a call, made eagerly under torch.compile (Dynamo
    breaks the graph once here instead of inside the tracing); the block
    mask's table on `device` (the query's), where the kernel reads it."""
    if block_mask is None:
        return Modifiers(score_mod, None)
    table = block_mask.kernel_table(device)
    if block_mask._all_full:
        # Every block full: nothing to skip, and (as in full blocks
        # anywhere) no mask_mod to evaluate.
        return Modifiers(score_mod, None)
    mask_mod = block_mask.mask_mod
    if not block_mask._promises_hold(device):
        mask_mod = _as_listed(mask_mod, table, block_mask.BLOCK_SIZE)
    return Modifiers(score_mod, mask_mod, table, block_mask.BLOCK_SIZE)


def _module_text(regions: List[str], types: List[str]) -> str:
    """An attn.attention holding `regions` and reading captures of `types`,
    as attn-compile --modifiers takes it."""
    t = "tensor<1x1x1x1xf32>"
    args = ", ".join([f"%attn_q: {t}"] +
                     [f"%attn_capture{i}: {ty}" for i, ty in enumerate(types)])
    captures = ""
    if types:
        names = ", ".join(f"%attn_capture{i}" for i in range(len(types)))
        captures = f" captures({names} : {', '.join(types)})"
    q = "%attn_q"
    return (f"func.func @modifiers({args}) {{\n"
            f"  %attn_o = attn.attention ins({q}, {q}, {q} : {t}, {t}, {t}){captures} "
            f"outs({q} : {t})\n"
            f"  {' '.join(regions)} -> {t}\n  return\n}}\n")


# ---------------------------------------------------------------------------
# Block masks
# ---------------------------------------------------------------------------

#: FlexAttention's default block size.
BLOCK_SIZE = 128


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention returns (FlexAttention's
    AuxRequest): `lse`, each row's log-sum-exp; `max_scores` is not
    computed by attn's kernels."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """flex_attention's auxiliary outputs: each requested one, else None."""

    lse: Optional[Tensor] = None
    max_scores: Optional[Tensor] = None


class BlockMask:
    """Which key blocks each query block attends, in FlexAttention's layout:
    for each [b, h, query block], `kv_num_blocks` partial blocks (some
    scores kept: mask_mod decides each) listed first in `kv_indices`, and
    `full_kv_num_blocks` full ones (every score kept) in `full_kv_indices`
    (None: no block is known full); the `q_*` lists are the same by key
    block. Made by create_block_mask or from_kv_blocks; flex_attention also
    takes PyTorch's own BlockMask.
    """

    def __init__(self, seq_lengths, block_size, mask_mod, kv_num_blocks, kv_indices,
                 full_kv_num_blocks=None, full_kv_indices=None, q_num_blocks=None,
                 q_indices=None, full_q_num_blocks=None, full_q_indices=None):
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise Error("BlockMask: full_kv_num_blocks and full_kv_indices are given together "
                        "or not at all")
        self.seq_lengths = tuple(int(n) for n in seq_lengths)
        self.BLOCK_SIZE = tuple(block_size)
        self.mask_mod = noop_mask if mask_mod is None else mask_mod
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        # Whether the lists were made from mask_mod (create_block_mask):
        # then they agree with it and the kernels take the table as the
        # promise it is. Lists from elsewhere (from_kv_blocks, PyTorch's
        # BlockMask, indexing) decide as FlexAttention's do: a block not
        # listed is left out and a full one kept whatever mask_mod says.
        self._from_mask_mod = False

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks: Tensor, kv_indices: Tensor,
                       full_kv_num_blocks: Optional[Tensor] = None,
                       full_kv_indices: Optional[Tensor] = None, BLOCK_SIZE=128,
                       mask_mod: Optional[Callable] = None, seq_lengths=None,
                       compute_q_blocks: bool = True) -> "BlockMask":
        """FlexAttention's BlockMask.from_kv_blocks: a block mask from its key
        block lists ([B, H, query blocks] counts, [B, H, query blocks, n]
        indices, the listed ones first), BLOCK_SIZE an int or (query, key)
        sizes, mask_mod deciding the scores of the partial blocks (None:
        every score of a listed block kept), seq_lengths (Q_LEN, KV_LEN)
        (None: whole blocks, query blocks × BLOCK_SIZE by key blocks ×
        BLOCK_SIZE)."""
        for name, tensor in (("kv_num_blocks", kv_num_blocks), ("kv_indices", kv_indices),
                             ("full_kv_num_blocks", full_kv_num_blocks),
                             ("full_kv_indices", full_kv_indices)):
            if tensor is not None and not isinstance(tensor, Tensor):
                raise Error(f"BlockMask.from_kv_blocks: {name} must be a tensor, "
                            f"not {type(tensor).__name__}")
        if kv_indices.dim() < 2:
            raise Error("BlockMask.from_kv_blocks: kv_indices must have at least 2 dims "
                        "(query blocks, listed key blocks)")
        sizes = _block_sizes("BlockMask.from_kv_blocks", BLOCK_SIZE)
        # Leading dims as FlexAttention's: [B, H] (missing ones are 1).
        lead = 4 - kv_indices.dim()
        if lead < 0:
            raise Error(f"BlockMask.from_kv_blocks: kv_indices has {kv_indices.dim()} dims; "
                        "at most 4 ([B, H, query blocks, listed key blocks])")

        def as4(t, dims):
            return None if t is None else t.reshape((1,) * (dims - t.dim()) + tuple(t.shape))

        kv_num_blocks, kv_indices = as4(kv_num_blocks, 3), as4(kv_indices, 4)
        full_kv_num_blocks = as4(full_kv_num_blocks, 3)
        full_kv_indices = as4(full_kv_indices, 4)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * sizes[0], kv_indices.shape[-1] * sizes[1])
        mask = cls(seq_lengths, sizes, mask_mod, kv_num_blocks, kv_indices,
                   full_kv_num_blocks, full_kv_indices)
        mask._check_lists()
        if compute_q_blocks:
            mask._fill_q_lists()
        return mask

    @classmethod
    def _of_torch(cls, mask) -> "BlockMask":
        """attn's BlockMask of PyTorch's (torch.nn.attention.flex_attention
        .BlockMask): its key block lists, block sizes, lengths and mask_mod;
        made once per PyTorch mask and remade when its lists change."""
        lists = (mask.kv_num_blocks, mask.kv_indices, mask.full_kv_num_blocks,
                 mask.full_kv_indices)
        key = tuple((id(t), t._version) if t is not None else None for t in lists)
        cached = getattr(mask, "_attn_block_mask", None)
        if cached is not None and cached[0] == key and cached[1].mask_mod is mask.mask_mod \
                and cached[1].seq_lengths == tuple(mask.seq_lengths):
            return cached[1]
        ours = cls.from_kv_blocks(
            *(None if t is None else t.cpu() for t in lists),
            BLOCK_SIZE=tuple(mask.BLOCK_SIZE), mask_mod=mask.mask_mod,
            seq_lengths=tuple(mask.seq_lengths), compute_q_blocks=False)
        try:
            mask._attn_block_mask = (key, ours)
        except AttributeError:  # a mask that takes no new attributes
            pass
        return ours

    @property
    def shape(self) -> Tuple[int, int, int, int]:
        batch, heads = self.kv_num_blocks.shape[:2]
        return (batch, heads, *self.seq_lengths)

    def numel(self) -> int:
        """The number of scores the mask covers (B · H · Q_LEN · KV_LEN)."""
        return math.prod(self.shape)

    def as_tuple(self):
        return (self.seq_lengths[0], self.seq_lengths[1], self.kv_num_blocks, self.kv_indices,
                self.full_kv_num_blocks, self.full_kv_indices, self.q_num_blocks,
                self.q_indices, self.full_q_num_blocks, self.full_q_indices,
                self.BLOCK_SIZE[0], self.BLOCK_SIZE[1], self.mask_mod)

    def _blocks(self) -> Tuple[int, int]:
        """(query blocks, key blocks) of the lengths."""
        return tuple(-(-n // size) for n, size in zip(self.seq_lengths, self.BLOCK_SIZE))

    def _check_lists(self) -> None:
        """Errors for lists that do not fit the lengths (a key block past
        KV_LEN, a count past the list, a row count other than the query
        blocks')."""
        rows, columns = self._blocks()
        for counts, indices, name in ((self.kv_num_blocks, self.kv_indices, "kv"),
                                      (self.full_kv_num_blocks, self.full_kv_indices,
                                       "full_kv")):
            if counts is None:
                continue
            if indices.dim() != 4 or counts.dim() != 3 \
                    or tuple(counts.shape) != tuple(indices.shape[:3]):
                raise Error(f"BlockMask: {name}_num_blocks {list(counts.shape)} and "
                            f"{name}_indices {list(indices.shape)} must be [B, H, query blocks] "
                            "and [B, H, query blocks, n]")
            if indices.shape[2] != rows:
                raise Error(f"BlockMask: {name}_indices has {indices.shape[2]} query blocks but "
                            f"Q_LEN = {self.seq_lengths[0]} in blocks of {self.BLOCK_SIZE[0]} "
                            f"makes {rows}")
            if counts.numel() and (int(counts.min()) < 0
                                   or int(counts.max()) > indices.shape[-1]):
                raise Error(f"BlockMask: {name}_num_blocks must be in [0, "
                            f"{indices.shape[-1]}] (the length of {name}_indices' rows)")
            listed = torch.arange(indices.shape[-1], device=indices.device) < counts[..., None]
            chosen = indices[listed]
            if chosen.numel() and (int(chosen.min()) < 0 or int(chosen.max()) >= columns):
                raise Error(f"BlockMask: {name}_indices lists key block {int(chosen.max())} "
                            f"(or a negative one) but KV_LEN = {self.seq_lengths[1]} in blocks "
                            f"of {self.BLOCK_SIZE[1]} makes {columns}")

    def _fill_q_lists(self) -> None:
        """The q_* lists (the same blocks by key block) of the kv_* lists."""
        partial = self._listed(self.kv_num_blocks, self.kv_indices).bool()
        self.q_num_blocks, self.q_indices = _block_lists(partial.transpose(-1, -2))
        if self.full_kv_num_blocks is not None:
            full = self._listed(self.full_kv_num_blocks, self.full_kv_indices).bool()
            self.full_q_num_blocks, self.full_q_indices = _block_lists(full.transpose(-1, -2))

    def _listed(self, counts: Optional[Tensor], indices: Optional[Tensor]) -> Tensor:
        """[B, H, query blocks, key blocks] int32 on the lists' device: 1
        where `indices` lists a block (its first `counts` entries); 0
        everywhere for lists that are None."""
        columns = self._blocks()[1]
        if counts is None:
            batch, heads, rows = self.kv_num_blocks.shape
            return torch.zeros(batch, heads, rows, columns, dtype=torch.int32,
                               device=self.kv_num_blocks.device)
        batch, heads, rows = counts.shape
        device = counts.device
        dense = torch.zeros(batch, heads, rows, columns, dtype=torch.int32, device=device)
        keep = torch.arange(indices.shape[-1], device=device)[None, None, None, :] \
            < counts[..., None]
        # Entries past a row's count may hold anything: read as block 0, add 0.
        listed = torch.where(keep, indices.long(), 0)
        return dense.scatter_add_(-1, listed, keep.to(torch.int32))

    def to_dense(self) -> Tensor:
        """[B, H, query blocks, key blocks] int32: 1 where a block is
        computed (partial or full), else 0."""
        return (self._listed(self.kv_num_blocks, self.kv_indices)
                | self._listed(self.full_kv_num_blocks, self.full_kv_indices))

    def kernel_table(self, device=None) -> Tensor:
        """The table the kernels take (docs/spec.md, "Score and mask
        modifiers" 7): 0 for a block to skip, 1 partial (the mask_mod
        decides each score), 2 full (every score kept), on `device` (the
        CPU's by default; a GPU kernel reads it on its GPU). Made once for
        the block lists as they are (a list replaced or changed in place
        makes it again), and copied once to each device: every call with the
        mask reads it."""
        lists = (self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                 self.full_kv_indices)
        key = tuple((id(t), t._version) if t is not None else None for t in lists)
        if getattr(self, "_table_key", None) != key:
            full = self._listed(self.full_kv_num_blocks, self.full_kv_indices)
            partial = self._listed(self.kv_num_blocks, self.kv_indices) & (1 - full)
            if _is_noop(self.mask_mod):
                # Listed blocks that mask_mod keeps whole are full, but for
                # those cut by a length (as create_block_mask's).
                cut = torch.zeros_like(partial)
                if self.seq_lengths[0] % self.BLOCK_SIZE[0]:
                    cut[:, :, -1] = 1
                if self.seq_lengths[1] % self.BLOCK_SIZE[1]:
                    cut[..., -1] = 1
                full, partial = full | (partial & (1 - cut)), partial & cut
            self._table = (partial + 2 * full).cpu()
            self._all_full = bool((self._table == 2).all())
            self._table_key = key
            self._device_tables = {}
        device = torch.device("cpu" if device is None else device)
        if device.type == "cpu":
            return self._table
        if device not in self._device_tables:
            self._device_tables[device] = self._table.to(device)
        return self._device_tables[device]

    def _promises_hold(self, device=None) -> bool:
        """Whether the kernel table's promises hold for mask_mod (docs/spec.md,
        "Score and mask modifiers" 7: nothing kept in a block it leaves
        out, everything in a full one), so that the kernels may take it
        with mask_mod as it is. True for lists made from mask_mod; lists
        from elsewhere are checked once against create_block_mask's of
        mask_mod (its compiled kernel where mask_mod traces, else PyTorch on
        `device`), and again when they change. Where they do not hold (or
        mask_mod cannot be evaluated), flex_attention applies mask_mod under
        the lists as FlexAttention's kernels do (_as_listed)."""
        if self._from_mask_mod:
            return True
        table = self.kernel_table()
        key = (self._table_key, self.mask_mod)
        if getattr(self, "_promise_key", None) != key:
            self._promise_key, self._promise = key, False
            batch, heads = table.shape[:2]
            for compiled in (True, False):
                try:
                    mine = create_block_mask(self.mask_mod, batch, heads, *self.seq_lengths,
                                             device="cpu" if compiled or device is None
                                             else device, BLOCK_SIZE=self.BLOCK_SIZE,
                                             _compile=compiled).kernel_table()
                except Exception:  # not traceable, or not evaluable at all
                    continue
                self._promise = bool((((table == 0) & (mine != 0)) |
                                      ((table == 2) & (mine != 2))).logical_not().all())
                break
        return self._promise

    def sparsity(self) -> float:
        """The percentage of blocks skipped (neither partial nor full)."""
        dense = self.to_dense()
        return 100.0 * (1.0 - float(dense.sum()) / max(dense.numel(), 1))

    def to(self, device) -> "BlockMask":
        """A BlockMask with the block lists on `device` (the kernels take
        the table on the query's device whatever the lists' device)."""
        moved = [None if t is None else t.to(device) for t in self.as_tuple()[2:10]]
        mask = BlockMask(self.seq_lengths, self.BLOCK_SIZE, self.mask_mod, *moved)
        mask._from_mask_mod = self._from_mask_mod
        return mask

    def __getitem__(self, index) -> "BlockMask":
        """The block mask of some batches, heads and query blocks
        (FlexAttention's BlockMask indexing: `mask[b]`, `mask[b, h]`,
        `mask[:, :, i]` — query *blocks*, an int kept as a length-1 dim).
        Its mask_mod cannot be used (its indices would be those of the whole
        mask): set a new one for the selected positions where partial blocks
        remain."""
        index = index if isinstance(index, tuple) else (index,)
        if len(index) > 3:
            raise Error("BlockMask indexing takes at most 3 indices: batch, head, query block")
        index = tuple(index) + (slice(None),) * (3 - len(index))
        normal = []
        for i, n in zip(index, self.kv_num_blocks.shape):
            if isinstance(i, int):
                if not -n <= i < n:
                    raise Error(f"BlockMask index {i} is out of range for a dim of {n}")
                i %= n
                i = slice(i, i + 1)
            normal.append(i)
        index = tuple(normal)

        def pick(t):
            return None if t is None else t[index]

        rows = index[2]
        if isinstance(rows, slice):
            first, stop, step = rows.indices(self.kv_num_blocks.shape[2])
            if step != 1:
                raise Error("BlockMask indexing takes a contiguous range of query blocks")
            seq_q = max(0, min(stop * self.BLOCK_SIZE[0], self.seq_lengths[0])
                        - first * self.BLOCK_SIZE[0])
        else:
            seq_q = pick(self.kv_num_blocks).shape[2] * self.BLOCK_SIZE[0]
        return BlockMask.from_kv_blocks(
            pick(self.kv_num_blocks), pick(self.kv_indices), pick(self.full_kv_num_blocks),
            pick(self.full_kv_indices), BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod,
            seq_lengths=(seq_q, self.seq_lengths[1]), compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len: int, new_kv_len: int) -> "BlockMask":
        """The mask cropped to its upper-left new_q_len × new_kv_len corner
        (PyTorch's BlockMask._adjust, which its error for a mask made for
        longer sequences suggests): right only where mask_mod means the same
        there (causal masks do; masks aligned to the end, like a decoding
        step's, do not)."""
        for name, value, most in (("new_q_len", new_q_len, self.seq_lengths[0]),
                                  ("new_kv_len", new_kv_len, self.seq_lengths[1])):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise Error(f"BlockMask._adjust: {name} is {value!r} but must be an integer "
                            f"in [1, {most}] (the mask is cropped, never grown)")
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        columns = -(-new_kv_len // self.BLOCK_SIZE[1])

        def cropped(counts, indices):
            if counts is None:
                return None, None
            return _block_lists(self._listed(counts, indices)[:, :, :rows, :columns].bool())

        mask = BlockMask.from_kv_blocks(
            *cropped(self.kv_num_blocks, self.kv_indices),
            *cropped(self.full_kv_num_blocks, self.full_kv_indices),
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod,
            seq_lengths=(new_q_len, new_kv_len), compute_q_blocks=self.q_indices is not None)
        mask._from_mask_mod = self._from_mask_mod
        return mask

    def to_string(self, grid_size=(20, 20), limit: int = 4) -> str:
        """The blocks of up to `limit` [b, h] pairs as text (as PyTorch's
        BlockMask.to_string), one character pair per cell of a grid of at
        most `grid_size` cells (an int, a (rows, columns) pair, or -1 for
        every block): '██' where every block of the cell is computed, '░░'
        where some are, '  ' where none."""
        dense = self.to_dense()
        batch, heads, rows, columns = dense.shape
        if grid_size == -1:
            grid_size = (rows, columns)
        elif isinstance(grid_size, int):
            grid_size = (grid_size, grid_size)
        row_step = max(1, -(-rows // grid_size[0]))
        column_step = max(1, -(-columns // grid_size[1]))
        parts = []
        for n, (b, h) in enumerate((b, h) for b in range(batch) for h in range(heads)):
            if n == limit:
                parts += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                          "You can also index (BlockMask[batch, head]) to choose a specific "
                          "batch or head"]
                break
            text = f"{(b, h)}\n"
            for r in range(0, rows, row_step):
                for c in range(0, columns, column_step):
                    share = float(dense[b, h, r:r + row_step, c:c + column_step].float().mean())
                    text += "██" if share == 1 else "  " if share == 0 else "░░"
                text += "\n"
            parts.append(text)
        return "\n".join(parts)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, "
                f"BLOCK_SIZE={self.BLOCK_SIZE}, mask_mod={getattr(self.mask_mod, '__name__', self.mask_mod)})")


def _is_noop(mask_mod) -> bool:
    """Whether mask_mod is attn's or PyTorch's noop_mask."""
    if mask_mod is noop_mask:
        return True
    try:
        from torch.nn.attention.flex_attention import noop_mask as torch_noop
    except ImportError:
        return False
    return mask_mod is torch_noop


def _as_listed(mask_mod: Callable, table: Tensor, block_size) -> Callable:
    """mask_mod as FlexAttention applies it under a block mask's lists: kept
    in a full block (table entry 2), mask_mod's bit in a partial one (1),
    excluded in a block not listed (0). The kernels evaluate it only where
    their own blocks meet entries of different kinds."""
    rows, keys = block_size

    def listed(b, h, q_idx, kv_idx):
        entry = table[b, h, q_idx // rows, kv_idx // keys]
        return (entry == 2) | ((entry == 1) & mask_mod(b, h, q_idx, kv_idx))

    return listed


def _sliced_mask_mod(b, h, q_idx, kv_idx):
    """The mask_mod of an indexed BlockMask, until the caller sets one."""
    raise Error("this BlockMask was indexed (mask[...]): its mask_mod would read the indices "
                "of the whole mask; set block_mask.mask_mod to one for the selected positions")


def _block_sizes(where: str, BLOCK_SIZE) -> Tuple[int, int]:
    """(query, key) block sizes of an int or a pair, each a positive int."""
    sizes = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    if len(sizes) != 2:
        raise Error(f"{where}: BLOCK_SIZE is an int or a (query, key) pair")
    for value in sizes:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Error(f"{where}: BLOCK_SIZE is {value!r} but must be a positive integer")
    return sizes


def _on_grid(fn, leading: tuple, batch: int, heads: int, rows: Tensor, columns: Tensor,
             accept: Callable[[Tensor], bool]):
    """fn(*leading, b, h, q_idx, kv_idx) on the grid [batch, heads, rows,
    columns]: by broadcasting where that gives a tensor `accept` takes, else
    (a function that needs 0-d arguments) with vmap over each index, and
    over the leading arguments' dims (the scores) alike; on rows' device."""
    device = rows.device
    b = torch.arange(batch, device=device)[:, None, None, None]
    h = torch.arange(heads, device=device)[None, :, None, None]
    try:
        result = fn(*leading, b, h, rows[None, None, :, None], columns[None, None, None, :])
        if isinstance(result, Tensor) and accept(result):
            return result
    except Exception:
        pass
    from torch.func import vmap

    mapped = fn
    for index in (3, 2, 1, 0):  # kv_idx innermost, b outermost
        dims = (0,) * len(leading) + tuple(0 if i == index else None for i in range(4))
        mapped = vmap(mapped, in_dims=dims, out_dims=0)
    return mapped(*leading, torch.arange(batch, device=device),
                  torch.arange(heads, device=device), rows, columns)


def _evaluate_mask(mask_mod, batch: int, heads: int, rows: Tensor, columns: Tensor) -> Tensor:
    """mask_mod on the grid [batch, heads, rows, columns] (bool)."""
    is_bool = lambda t: t.dtype == torch.bool  # noqa: E731
    kept = _on_grid(mask_mod, (), batch, heads, rows, columns, is_bool)
    if not isinstance(kept, Tensor) or not is_bool(kept):
        raise Error("create_block_mask: mask_mod must return a bool tensor (True = attend)")
    return kept.expand(batch, heads, len(rows), len(columns))


def _block_lists(blocks: Tensor) -> Tuple[Tensor, Tensor]:
    """Counts and indices (kept blocks first, in order) along the last dim."""
    counts = blocks.sum(-1, dtype=torch.int32)
    order = torch.argsort((~blocks).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return counts, order


def create_block_mask(mask_mod: Callable, B: Optional[int], H: Optional[int], Q_LEN: int,
                      KV_LEN: int, device="cpu", BLOCK_SIZE=BLOCK_SIZE,
                      _compile: bool = False, separate_full_blocks: bool = True,
                      compute_dq_write_order: bool = False,
                      dq_kv_order: bool = True) -> BlockMask:
    """FlexAttention's create_block_mask: evaluates `mask_mod(b, h, q_idx,
    kv_idx)` over [B, H, Q_LEN, KV_LEN] (B or H None: broadcast over it) and
    lists, per block of BLOCK_SIZE (an int, or (query, key) block sizes),
    the partial and the full key blocks of each query block. `_compile`:
    evaluate the mask_mod in a compiled kernel (traced as flex_attention
    traces it; the kernel is compiled once and cached) instead of with
    PyTorch: the same blocks, 5-10x faster on long sequences. `device`:
    where the mask_mod is evaluated (that of the tensors it captures; cpu
    or cuda); the block lists are kept on the CPU. `separate_full_blocks`
    False lists every kept block as partial (the mask_mod evaluated in all
    of them). `compute_dq_write_order` and `dq_kv_order` order the work of
    PyTorch's GPU backward; attn's backward is deterministic without them,
    and they change nothing here."""
    if not callable(mask_mod):
        raise Error("create_block_mask: mask_mod must be a callable (b, h, q_idx, kv_idx) -> bool")
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        raise Error(f"create_block_mask: device is {device} but attn runs on the CPU and "
                    "on NVIDIA GPUs (cuda)")
    if _compile and device.type != "cpu":
        raise Error(f"create_block_mask: _compile evaluates the mask_mod in a CPU kernel, "
                    f"but device is {device}")
    sizes = _block_sizes("create_block_mask", BLOCK_SIZE)
    batch = 1 if B is None else B
    heads = 1 if H is None else H
    for name, value in (("B", batch), ("H", heads), ("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Error(f"create_block_mask: {name} is {value!r} but must be a positive integer")
    q_block, kv_block = sizes
    rows_n, cols_n = -(-Q_LEN // q_block), -(-KV_LEN // kv_block)
    if _compile:
        table = _compiled_table(mask_mod, batch, heads, Q_LEN, KV_LEN, sizes)
        return _block_mask(mask_mod, (Q_LEN, KV_LEN), sizes, table == 2, table == 1,
                           separate_full_blocks)
    any_kept = torch.zeros(batch, heads, rows_n, cols_n, dtype=torch.bool)
    all_kept = torch.zeros_like(any_kept)
    columns = torch.arange(KV_LEN, device=device)
    # A bounded grid at a time: query blocks whose scores fit in ~16M bools.
    step = max(1, (1 << 24) // max(1, batch * heads * q_block * KV_LEN))
    pad = cols_n * kv_block - KV_LEN
    for first in range(0, rows_n, step):
        last = min(rows_n, first + step)
        rows = torch.arange(first * q_block, min(Q_LEN, last * q_block), device=device)
        kept = _evaluate_mask(mask_mod, batch, heads, rows, columns).cpu()
        n = last - first
        row_pad = n * q_block - len(rows)
        # Positions past Q_LEN or KV_LEN count as excluded (as PyTorch's):
        # a block that holds some is never full.
        padded = torch.nn.functional.pad(kept, (0, pad, 0, row_pad), value=False)
        # Reduced as bytes (a bool is stored as 0 or 1): max and min over a
        # block are 8x faster than any() and all() on the CPU (4.5 against
        # 37 ms for [1, 8, 2048, 2048]).
        grid = padded.view(torch.uint8).reshape(batch, heads, n, q_block, cols_n, kv_block)
        any_kept[:, :, first:last] = grid.amax(dim=(3, 5)).bool()
        all_kept[:, :, first:last] = grid.amin(dim=(3, 5)).bool()
    return _block_mask(mask_mod, (Q_LEN, KV_LEN), sizes, all_kept, any_kept & ~all_kept,
                       separate_full_blocks)


def _block_mask(mask_mod, lengths, sizes, full: Tensor, partial: Tensor,
                separate_full_blocks: bool = True) -> BlockMask:
    """The BlockMask of the full and the partial blocks (bool [B, H, query
    blocks, key blocks]); without `separate_full_blocks` the full ones are
    listed as partial."""
    if not separate_full_blocks:
        mask = BlockMask(lengths, sizes, mask_mod, *_block_lists(partial | full), None, None,
                         *_block_lists((partial | full).transpose(-1, -2)))
    else:
        mask = BlockMask(lengths, sizes, mask_mod, *_block_lists(partial), *_block_lists(full),
                         *_block_lists(partial.transpose(-1, -2)),
                         *_block_lists(full.transpose(-1, -2)))
    mask._from_mask_mod = True
    return mask


def create_mask(mod_fn: Callable, B: Optional[int], H: Optional[int], Q_LEN: int, KV_LEN: int,
                device="cpu") -> Tensor:
    """FlexAttention's create_mask: the bool [B, H, Q_LEN, KV_LEN] mask of a
    mask_mod (True where it keeps the score), or of a score_mod (True where
    it leaves a 0 score finite, False where it gives -inf); B or H None
    makes that dim 1."""
    if not callable(mod_fn):
        raise Error("create_mask: mod_fn must be a mask_mod or a score_mod (a callable)")
    batch = 1 if B is None else B
    heads = 1 if H is None else H
    for name, value in (("B", batch), ("H", heads), ("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Error(f"create_mask: {name} is {value!r} but must be a positive integer")
    rows = torch.arange(Q_LEN, device=device)
    columns = torch.arange(KV_LEN, device=device)
    if _positional_arguments(mod_fn) == 5:
        zeros = torch.zeros(batch, heads, Q_LEN, KV_LEN, device=device)
        scores = _on_grid(mod_fn, (zeros,), batch, heads, rows, columns,
                          lambda t: t.is_floating_point())
        return ~torch.isneginf(scores.expand(batch, heads, Q_LEN, KV_LEN))
    return _evaluate_mask(mod_fn, batch, heads, rows, columns)


def _positional_arguments(fn: Callable) -> Optional[int]:
    """How many arguments `fn` needs (those without defaults), or None."""
    import inspect

    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(1 for p in parameters if p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _compiled_table(mask_mod, batch: int, heads: int, seq_q: int, seq_k: int,
                    sizes) -> Tensor:
    """The kernels' block table ([batch, heads, query blocks, key blocks]
    int32: 0 empty, 1 partial, 2 full) of `mask_mod`, filled by a kernel
    compiled from it (attn_fill_block_table)."""
    table = torch.empty(batch, heads, -(-seq_q // sizes[0]), -(-seq_k // sizes[1]),
                        dtype=torch.int32)
    placeholder = torch.zeros(1, 1, 1, 1, dtype=torch.int32)
    modifiers = Modifiers(None, mask_mod, placeholder, sizes)
    if modifiers.source is None:
        # A mask_mod that keeps everything: blocks cut by a length are not
        # full (the positions past it count as excluded).
        table.fill_(2)
        if seq_q % sizes[0]:
            table[:, :, -1] = 1
        if seq_k % sizes[1]:
            table[..., -1] = 1
        return table
    from . import _cache

    kernel = _cache.kernel("name=attn_block_table,d=16", modifiers=modifiers.source)
    kernel.fill_block_table(batch, heads, seq_q, seq_k, modifiers.captures[:-1], table)
    return table


# ---------------------------------------------------------------------------
# flex_attention
# ---------------------------------------------------------------------------


def _torch_block_mask_type():
    try:
        from torch.nn.attention.flex_attention import BlockMask as TorchBlockMask
    except ImportError:  # a PyTorch without FlexAttention
        return None
    return TorchBlockMask


def _checked_block_mask(block_mask, query: Tensor, key: Tensor) -> BlockMask:
    """attn's BlockMask for the call (PyTorch's converted), checked against
    its shapes."""
    torch_type = _torch_block_mask_type()
    if torch_type is not None and isinstance(block_mask, torch_type):
        block_mask = BlockMask._of_torch(block_mask)
    if not isinstance(block_mask, BlockMask):
        raise Error("block_mask must be a BlockMask (from attn.create_block_mask or PyTorch's "
                    f"create_block_mask), not {type(block_mask).__name__}")
    seq_q, seq_k = int(query.shape[-2]), int(key.shape[-2])
    if block_mask.seq_lengths != (seq_q, seq_k):
        raise Error(f"block_mask was made for Q_LEN, KV_LEN = {block_mask.seq_lengths} but the "
                    f"call has query length {seq_q} and key length {seq_k} (make one for these "
                    "lengths, or crop a longer one with block_mask._adjust(q_len, kv_len) where "
                    "its mask_mod means the same in the upper-left corner)")
    batch, heads = block_mask.shape[:2]
    if batch not in (1, int(query.shape[0])) or heads not in (1, int(query.shape[1])):
        raise Error(f"block_mask was made for B, H = ({batch}, {heads}) but the call has "
                    f"B = {int(query.shape[0])} and {int(query.shape[1])} query heads "
                    "(B and H must match or be 1/None)")
    return block_mask


def flex_attention(query: Tensor, key: Tensor, value: Tensor,
                   score_mod: Optional[Callable] = None, block_mask: Optional[BlockMask] = None,
                   scale: Optional[float] = None, enable_gqa: bool = False,
                   return_lse: bool = False, kernel_options: Optional[dict] = None, *,
                   return_aux: Optional[AuxRequest] = None, sinks: Optional[Tensor] = None):
    """torch.nn.attention.flex_attention.flex_attention on attn's kernels.

    query [B, Hq, L, E], key [B, Hkv, S, E], value [B, Hkv, S, Ev] (CPU
    tensors, f32/bf16/f16; Hq = G * Hkv with enable_gqa); score_mod(score,
    b, h, q_idx, kv_idx) -> score and block_mask (create_block_mask's, whose
    mask_mod decides which scores are kept) compiled into the kernel; scale
    defaults to 1/sqrt(E). sinks: one logit per query head [Hq] (docs/spec.md,
    "Attention sinks"). Returns the output [B, Hq, L, Ev] (and with
    return_lse the log-sum-exp [B, Hq, L] f32: -inf on a row with nothing
    kept, whose output is 0); with return_aux (an AuxRequest, attn's or
    PyTorch's) the output and an AuxOutput holding the LSE if it asks for
    it (return_lse is then ignored, as in PyTorch); max_scores is not
    computed (nor by PyTorch's CPU FlexAttention). Differentiable in query, key, value and sinks,
    through the score_mod too (the compiler differentiates it), and in the
    tensors the score_mod captures that require grad (a trained bias table
    or slopes: the backward kernel computes their gradient beside dQ, dK
    and dV; where its per-work-item partial sums would pass
    CAPTURE_PARTIAL_BYTES, PyTorch re-runs the score_mod a block of query
    rows at a time instead).
    """
    if kernel_options:
        raise Error("kernel_options are FlexAttention's Triton tuning knobs; attn chooses each "
                    "kernel's blocking itself (pass None)")
    if return_aux is not None:
        if not all(hasattr(return_aux, f) for f in AuxRequest._fields):
            raise Error("return_aux must be an AuxRequest(lse=..., max_scores=...), not "
                        f"{type(return_aux).__name__}")
        if return_aux.max_scores:
            raise Error("return_aux: max_scores is not computed by attn's kernels (nor by "
                        "PyTorch's FlexAttention on the CPU); ask for AuxRequest(lse=True)")
        output = flex_attention(query, key, value, score_mod, block_mask, scale, enable_gqa,
                                bool(return_aux.lse), sinks=sinks)
        if return_aux.lse:
            return output[0], AuxOutput(lse=output[1])
        return output, AuxOutput()
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if not isinstance(tensor, Tensor):
            raise Error(f"{name} must be a torch.Tensor, not {type(tensor).__name__}")
        if tensor.dim() != 4:
            raise Error(f"{name}: shape is {list(tensor.shape)} but flex_attention takes 4-D "
                        "[B, H, S, D] tensors")
    if block_mask is not None:
        block_mask = _checked_block_mask(block_mask, query, key)
    modifiers = _traced(score_mod, block_mask, query.device)
    _check_capture_devices(modifiers._held, query)
    if sinks is not None and not isinstance(sinks, Tensor):
        sinks = torch.as_tensor(sinks)
    from . import _torch

    with_lse = return_lse or _torch._needs_grad(query, key, value, sinks)
    bias = _bias_as_mask(modifiers, query, key)
    if bias is not None:
        # score + T[b, h, q_idx, kv_idx]: T (a view of it) as an additive
        # attn_mask, which the kernels read a block of rows at a time by
        # vector loads; its gradient, where T requires one, is the mask's.
        return _torch.scaled_dot_product_attention(
            query, key, value, bias, False, scale, bool(enable_gqa), "top_left", None, None,
            None, bool(return_lse), 0.0, None, sinks)
    if modifiers.source is None:
        # Plain attention (which computes the LSE itself when a gradient
        # needs it).
        return _torch.scaled_dot_product_attention(
            query, key, value, None, False, scale, bool(enable_gqa), "top_left", None, None,
            None, bool(return_lse), 0.0, None, sinks)
    captures = modifiers.captures
    if modifiers.trained and torch.is_grad_enabled() and _compiled_capture_gradients(
            query, key, modifiers):
        # The backward kernel gives the captured tensors' gradients with dQ,
        # dK and dV, through the operator (which needs the LSE).
        output, lse = torch.ops.attn.flex(query, key, value, modifiers.trained_captures(),
                                          modifiers.source, scale, bool(enable_gqa), True,
                                          sinks)
        return (output, lse) if return_lse else output
    if modifiers.trained and torch.is_grad_enabled():
        # Partials too large: the kernels give dQ, dK, dV (and dsinks)
        # through the operator; the captured tensors' gradient comes from
        # _CaptureGradients, which needs the LSE.
        output, lse = torch.ops.attn.flex(query, key, value, captures, modifiers.source,
                                          scale, bool(enable_gqa), True, sinks)
        state = _CaptureState(query, key, value, modifiers, block_mask, scale)
        output, lse = _CaptureGradients.apply(output, lse, state, *modifiers.trained)
        return (output, lse) if return_lse else output
    output, lse = torch.ops.attn.flex(query, key, value, captures, modifiers.source,
                                      scale, bool(enable_gqa), with_lse, sinks)
    return (output, lse) if return_lse else output


#: A score_mod that adds one captured element at (some of b, h in order,
#: then) q_idx, kv_idx to the score, as _trace writes it.
_BIAS_SCORE_MOD = re.compile(
    r"  score_mod \{\n"
    r"  \^bb0\(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index\):\n"
    r"    %v0 = attn\.captured 0 \[(?P<indices>(?:%b, )?(?:%h, )?%q_idx, %kv_idx)\] : f32\n"
    r"    %v1 = arith\.addf (?:%score, %v0|%v0, %score) : f32\n"
    r"    attn\.yield %v1 : f32\n"
    r"  \} ->")

#: The attn_mask dim of each index a bias score_mod reads.
_MASK_DIMS = {"%b": 0, "%h": 1, "%q_idx": 2, "%kv_idx": 3}


def _bias_dims(source: Optional[str], captures: int) -> Optional[List[int]]:
    """For modifiers that are only `score + T[b, h, q_idx, kv_idx]` (b and h
    optional; a per-position bias, learned or not): the attn_mask dim of
    each of T's indices. Read from the traced text (as the trace is made,
    outside torch.compile's graph)."""
    if (source is None or captures != 1 or "mask_mod" in source
            or "attn.block_mask" in source):
        return None
    match = _BIAS_SCORE_MOD.search(source)
    if match is None:
        return None
    return [_MASK_DIMS[name] for name in match["indices"].split(", ")]


def _bias_as_mask(modifiers: Modifiers, query: Tensor, key: Tensor) -> Optional[Tensor]:
    """For a call whose modifiers are a per-position bias (_bias_dims), its
    tensor T as the additive [B, H, L, S] attn_mask that computes the same:
    a view, its dims past the call's sizes cut, a dim of 1 broadcast (as
    the score_mod's clamped index reads it too). None where that is not
    exact: T of another dtype than the query's (the score_mod adds it in
    f32; the mask path takes the query's dtype), or a dim of T between 1
    and the call's size (whose clamped reads repeat its last element). The
    kernels with a mask read it by vector loads; through the score_mod,
    f32's rows in lanes read a column of T a key (2x the time)."""
    dims = modifiers.bias_dims
    if dims is None:
        return None
    table = modifiers._held[0]
    sizes = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    if table.dtype != query.dtype or table.dim() != len(dims) or 0 in sizes:
        return None
    mask = table
    for axis, dim in enumerate(dims):
        have, need = table.shape[axis], sizes[dim]
        if have > need:
            mask = mask.narrow(axis, 0, need)
        elif have not in (need, 1):
            return None
    for dim in (0, 1):
        if dim not in dims:
            mask = mask.unsqueeze(dim)
    return mask


# ---------------------------------------------------------------------------
# Gradients of captured tensors
# ---------------------------------------------------------------------------

#: The most bytes of partial sums (one copy of a captured tensor per batch
#: and key/value head) that the backward kernel may write for the captured
#: tensors' gradients; above it (a per-position bias table, say) they are
#: computed in PyTorch instead, a block of query rows at a time.
CAPTURE_PARTIAL_BYTES = 256 << 20


def _compiled_capture_gradients(query: Tensor, key: Tensor, modifiers) -> bool:
    """Whether the backward kernel computes the captured tensors' gradients
    (their partial sums fit in CAPTURE_PARTIAL_BYTES)."""
    work_items = query.shape[0] * key.shape[1]
    total = sum(modifiers.captures[n].numel() for n in modifiers.differentiated())
    return work_items * total * 4 <= CAPTURE_PARTIAL_BYTES


#: Bytes of the [B, Hq, rows, Sk] f32 blocks that the captured tensors'
#: gradient recomputes at a time.
CAPTURE_BLOCK_BYTES = 64 << 20


class _CaptureState:
    """What the captured tensors' gradient reads of a call."""

    def __init__(self, query, key, value, modifiers, block_mask, scale):
        self.query, self.key, self.value = query.detach(), key.detach(), value.detach()
        self.score_mod = modifiers.score_mod
        self.block_mask = block_mask
        self.scale = scale


class _CaptureGradients(torch.autograd.Function):
    """The identity on (O, LSE) whose backward gives the tensors a score_mod
    captures their gradient (docs/spec.md, "Score and mask modifiers" 5):
    with s' = score_mod(s, b, h, i, j) and P = exp(s' − LSE) at the kept
    positions, dL/ds' = P ∘ (dO·Vᵀ − rowsum(dO ∘ O) + dLSE), and each captured
    tensor's gradient is the vector-Jacobian product of the score_mod (run in
    PyTorch, in f32, a block of query rows at a time) with it:
    deterministic, O(block) memory."""

    @staticmethod
    def forward(ctx, output, lse, state, *trained):
        ctx.state, ctx.trained = state, trained
        ctx.save_for_backward(output, lse)
        return output.clone(), lse.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output, grad_lse):
        output, lse = ctx.saved_tensors
        grads = _capture_gradients(ctx.state, ctx.trained, ctx.needs_input_grad[3:],
                                   output, lse, grad_output, grad_lse)
        return (grad_output, grad_lse, None, *grads)


def _evaluate_score(score_mod, scores: Tensor, rows: Tensor, columns: Tensor) -> Tensor:
    """score_mod on the scores [B, H, rows, columns]."""
    result = _on_grid(score_mod, (scores,), scores.shape[0], scores.shape[1], rows,
                      columns, lambda t: True)
    return result.expand(scores.shape)


def _capture_gradients(state, trained, needed, output, lse, grad_output, grad_lse):
    """The gradient of each tensor in `trained` (None where not `needed`)."""
    query, key, value = state.query, state.key, state.value
    batch, heads, seq_q, head_dim = query.shape
    seq_k = key.shape[2]
    group = heads // key.shape[1]
    scale = 1.0 / math.sqrt(head_dim) if state.scale is None else float(state.scale)
    zeros = [torch.zeros_like(t, dtype=torch.float32) for t in trained]
    if state.score_mod is None or grad_output is None and grad_lse is None:
        return [z.to(t.dtype) if need else None
                for z, t, need in zip(zeros, trained, needed)]
    k = key.float().repeat_interleave(group, 1)
    v = value.float().repeat_interleave(group, 1)
    q, lse = query.float(), lse.detach()
    do = (torch.zeros_like(output, dtype=torch.float32) if grad_output is None
          else grad_output.float())
    delta = (do * output.float()).sum(-1)
    if grad_lse is not None:
        delta = delta - grad_lse.float()
    table = block_size = None
    if state.block_mask is not None:
        table, block_size = state.block_mask.kernel_table(), state.block_mask.BLOCK_SIZE
    columns = torch.arange(seq_k)
    rows_per_block = max(1, CAPTURE_BLOCK_BYTES // max(1, batch * heads * seq_k * 4 * 6))
    for lo in range(0, seq_q, rows_per_block):
        hi = min(seq_q, lo + rows_per_block)
        rows = torch.arange(lo, hi)
        scores = (q[:, :, lo:hi] @ k.transpose(-1, -2)) * scale
        with torch.enable_grad():
            modified = _evaluate_score(state.score_mod, scores, rows, columns)
        if not modified.requires_grad:
            continue  # no trained tensor reaches the scores
        row_lse = lse[:, :, lo:hi, None]
        kept = torch.isfinite(row_lse).expand(modified.shape)
        if table is not None:
            kind = table[:, :, rows // block_size[0]][:, :, :, columns // block_size[1]]
            partial = _evaluate_mask(state.block_mask.mask_mod, batch, heads, rows, columns)
            kept = kept & ((kind == 2) | ((kind == 1) & partial))
        p = torch.where(kept, torch.exp(modified.detach() - row_lse),
                        torch.zeros((), dtype=torch.float32))
        dp = do[:, :, lo:hi] @ v.transpose(-1, -2)
        ds = p * (dp - delta[:, :, lo:hi, None])
        parts = torch.autograd.grad(modified, trained, ds, allow_unused=True)
        for total, part in zip(zeros, parts):
            if part is not None:
                total += part
    return [z.to(t.dtype) if need else None for z, t, need in zip(zeros, trained, needed)]


# ---------------------------------------------------------------------------
# The operator torch.ops.attn.flex and its gradient
# ---------------------------------------------------------------------------


def _check_capture_devices(captures: List[Tensor], query: Tensor) -> None:
    """The kernel reads its captured tensors where it runs: on query's
    device. Checked before the operator dispatches (a tensor elsewhere, on
    meta say, would send it to its fake implementation)."""
    for n, capture in enumerate(captures):
        if capture.device != query.device:
            raise Error(f"captures[{n}]: a tensor the score_mod or mask_mod reads is on "
                        f"{capture.device} but query is on {query.device}")


def _capsules(tensors):
    from ._torch import _capsule

    return [_capsule(t) for t in tensors]


def _flex_eager(query: Tensor, key: Tensor, value: Tensor, captures: List[Tensor],
                modifiers: str, scale: Optional[float], enable_gqa: bool, return_lse: bool,
                sinks: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The operator: attention with the score and mask modifiers of the
    .mlir text `modifiers`, reading `captures`."""
    from ._torch import _capsule, _gpu_launch

    query, key, value = query.detach(), key.detach(), value.detach()
    _core.check_shapes(query, key, value, enable_gqa)
    # On cuda:0 the GPU kernel (its modifiers compiled in), queued on
    # PyTorch's current stream; the captured tensors on the same device.
    gpu = _gpu_launch(query, key, value, None, sinks)
    _check_capture_devices(captures, query)
    if sinks is not None:
        _core.check_sinks(sinks.shape, query.shape[1])
        sinks = sinks.detach().float()
    spec = _core.spec_for(query, key, value, None, False, scale, "top_left", None, None, None,
                          return_lse, sinks=sinks is not None)
    batch, heads, seq_q = query.shape[:3]
    output = query.new_empty((batch, heads, seq_q, value.shape[3]))
    lse = query.new_empty((batch, heads, seq_q) if return_lse else (0,), dtype=torch.float32)
    _core.run(spec, _capsule(query), _capsule(key), _capsule(value), None, _capsule(output),
              _capsule(lse) if return_lse else None, 0.0, 0,
              None if sinks is None else _capsule(sinks), modifiers=modifiers,
              captures=_capsules(captures), gpu=gpu)
    return output, lse


flex_op = torch.library.custom_op("attn::flex", _flex_eager, mutates_args=())


@flex_op.register_fake
def _flex_fake(query, key, value, captures, modifiers, scale, enable_gqa, return_lse,
               sinks=None):
    batch, heads, seq_q = query.shape[:3]
    output = query.new_empty((batch, heads, seq_q, value.shape[3]))
    lse = query.new_empty((batch, heads, seq_q) if return_lse else (0,), dtype=torch.float32)
    return output, lse


def _flex_setup_context(ctx, inputs, output):
    query, key, value, captures, modifiers, scale, enable_gqa, return_lse, *rest = inputs
    sinks = rest[0] if rest else None
    ctx.modifiers, ctx.scale, ctx.enable_gqa = modifiers, scale, enable_gqa
    ctx.return_lse = return_lse
    ctx.num_captures = len(captures)
    ctx.trained = [n for n, c in enumerate(captures) if c.requires_grad]
    out, lse = output
    ctx.save_for_backward(query, key, value, out, lse, sinks, *captures)


def _flex_backward(ctx, grad_output, grad_lse):
    from ._torch import _sinks_gradient

    query, key, value, out, lse, sinks, *captures = ctx.saved_tensors
    if lse.dim() != 3:
        raise Error("flex_attention's backward needs the forward's LSE (return_lse)")
    if grad_output is None:
        grad_output = torch.zeros_like(out)
    if not ctx.return_lse:
        grad_lse = None
    grad_query, grad_key, grad_value, trained_grads = torch.ops.attn.flex_backward(
        query, key, value, captures, ctx.modifiers, ctx.scale, out, lse, grad_output,
        grad_lse, ctx.trained)
    grad_captures = [None] * ctx.num_captures
    for n, grad in zip(ctx.trained, trained_grads):
        grad_captures[n] = grad
    grad_sinks = None
    if sinks is not None and ctx.needs_input_grad[8]:
        grad_sinks = _sinks_gradient(sinks, out, lse, grad_output, grad_lse)
    return (grad_query, grad_key, grad_value, grad_captures, None, None, None,
            None, grad_sinks)


def _flex_backward_eager(query: Tensor, key: Tensor, value: Tensor, captures: List[Tensor],
                         modifiers: str, scale: Optional[float], output: Tensor, lse: Tensor,
                         grad_output: Tensor, grad_lse: Optional[Tensor],
                         trained: List[int]) -> Tuple[Tensor, Tensor, Tensor, List[Tensor]]:
    """The backward operator: dQ, dK, dV of a call of torch.ops.attn.flex
    (its O and LSE given) for dO and, when not None, dLSE; and the gradient
    of each capture numbered in `trained` (f32, shaped as the capture; 0
    for one that only the mask_mod reads)."""
    from ._torch import _capsule, _gpu_launch

    # On cuda:0 the GPU backward kernel, queued on PyTorch's current stream.
    gpu = _gpu_launch(query, key, value, None, None)
    _check_capture_devices(captures, query)
    # An LSE the caller did not use gets zeros from autograd: no dLSE then
    # (a kernel without it). On a GPU the test would wait for the stream:
    # the dLSE of zeros goes to the kernel instead.
    if grad_lse is not None and gpu is None and not bool(grad_lse.any()):
        grad_lse = None
    query, key, value, output, lse, grad_output = (
        t.detach() for t in (query, key, value, output, lse, grad_output))
    captures = [c.detach() for c in captures]
    spec = _core.spec_for(query, key, value, None, False, scale, "top_left", None, None,
                          None, grad_lse is not None, backward=True)
    # The trained captures' gradients: partial sums per work item (batch,
    # key/value head) from the kernel, summed here in row order.
    reads = _score_mod_reads(modifiers)
    compiled = [n for n in trained if n in reads]
    if compiled and gpu:
        raise Error(f"captures[{compiled[0]}]: the gradient of a captured tensor that the "
                    f"score_mod reads runs on the CPU only (query is on {query.device}); "
                    "the GPU computes the gradients of query, key and value")
    work_items = query.shape[0] * key.shape[1]
    partials = [torch.empty(work_items, captures[n].numel()) for n in compiled]
    if compiled:
        spec += ",dcaptures=" + ":".join(str(n) for n in compiled)
    grad_query = torch.empty_like(query, memory_format=torch.contiguous_format)
    grad_key = torch.empty_like(key, memory_format=torch.contiguous_format)
    grad_value = torch.empty_like(value, memory_format=torch.contiguous_format)
    _core.run_backward(spec, _capsule(query), _capsule(key), _capsule(value), None,
                       _capsule(output), _capsule(lse), _capsule(grad_output),
                       None if grad_lse is None else _capsule(grad_lse.detach().float()),
                       _capsule(grad_query), _capsule(grad_key), _capsule(grad_value),
                       modifiers=modifiers, captures=_capsules(captures),
                       grad_captures=_capsules(partials), gpu=gpu)
    grads = {n: torch.zeros(captures[n].shape, device=captures[n].device)
             for n in trained}
    for n, partial in zip(compiled, partials):
        total = grads[n].view(-1)
        for row in partial:  # in work-item order: the same bits on any thread count
            total += row
    return grad_query, grad_key, grad_value, [grads[n] for n in trained]


flex_backward_op = torch.library.custom_op("attn::flex_backward", _flex_backward_eager,
                                           mutates_args=())


@flex_backward_op.register_fake
def _flex_backward_fake(query, key, value, captures, modifiers, scale, output, lse,
                        grad_output, grad_lse, trained):
    return (torch.empty_like(query, memory_format=torch.contiguous_format),
            torch.empty_like(key, memory_format=torch.contiguous_format),
            torch.empty_like(value, memory_format=torch.contiguous_format),
            [captures[n].new_empty(captures[n].shape, dtype=torch.float32) for n in trained])


def _score_mod_reads(source: str) -> set:
    """The capture numbers that the score_mod of modifiers text `source`
    (_module_text's: the score_mod region first) reads."""
    start = source.find("score_mod {")
    if start < 0:
        return set()
    end = source.find("mask_mod {", start)
    region = source[start:end if end >= 0 else len(source)]
    return {int(n) for n in re.findall(r"attn\.captured (\d+) \[", region)}


flex_op.register_autograd(_flex_backward, setup_context=_flex_setup_context)
