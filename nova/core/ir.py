"""The Program: a flat SSA list of equations over typed values, printed in MLIR syntax.

A Program prints as a `func.func @main` of `nova` dialect ops, e.g.
`%3 = nova.mul %1, %2 : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>`,
parses back (`parse_program`), verifies (`Program.verify`), and has a canonical structural hash
(`Program.structural_hash`) that is invariant under renaming of values.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from nova.core import dtypes

# Constants with at most this many elements print inline as dense<...>; larger ones go to the
# MLIR resource section at the end of the text (dense_resource<...>).
INLINE_CONSTANT_LIMIT = 16


class TensorType:
    """The abstract value of an array: static shape (a tuple of ints) and dtype (np.dtype).

    Immutable and interned: `TensorType((8, 64), np.float32)` returns the one instance for that
    shape and dtype, so the tens of thousands of types a trace and the compiler create cost a
    dictionary lookup each and compare by identity first. Raises TypeError for a shape that is
    not a sequence of integers or a dtype NumPy does not know.
    """

    __slots__ = ("_hash", "_size", "_text", "dtype", "shape")
    _interned: dict = {}

    def __new__(cls, shape, dtype):
        if type(shape) is not tuple:
            shape = tuple(shape)  # once: a generator or iterator can be read only once
        key = (shape, dtype)
        try:
            return cls._interned[key]
        except (KeyError, TypeError):
            pass
        shape = tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        if dtype not in dtypes.MLIR_NAME:
            raise TypeError(f"TensorType: dtype {dtype} is not one Nova supports "
                            f"({', '.join(str(d) for d in dtypes.SUPPORTED)})")
        canon = (shape, dtype)
        self = cls._interned.get(canon)
        if self is None:
            self = object.__new__(cls)
            setattr_ = object.__setattr__
            setattr_(self, "shape", shape)
            setattr_(self, "dtype", dtype)
            # Derived once: the compiler asks for sizes and prints types many thousand times.
            size = 1
            for d in shape:
                size *= d
            setattr_(self, "_size", size)
            el = dtypes.MLIR_NAME[dtype]
            setattr_(self, "_text", "tensor<" + "".join(f"{d}x" for d in shape) + f"{el}>")
            setattr_(self, "_hash", hash(canon))
            cls._interned[canon] = self
        try:
            cls._interned[key] = self
        except TypeError:
            pass  # an unhashable spelling of the dtype: found again by its canonical key
        return self

    def __setattr__(self, name, value):
        raise AttributeError(f"TensorType is immutable (cannot set {name!r})")

    def __delattr__(self, name):
        raise AttributeError(f"TensorType is immutable (cannot delete {name!r})")

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TensorType):
            return NotImplemented
        return self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (TensorType, (self.shape, self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        return self._size * self.dtype.itemsize

    def __str__(self):
        return self._text

    __repr__ = __str__


class Var:
    """An SSA value. Identity is the object; names are assigned when a Program is printed."""

    __slots__ = ("hint", "type")

    def __init__(self, type_: TensorType, hint: str | None = None):
        self.type = type_
        self.hint = hint

    def __repr__(self):
        return f"Var({self.type})"


@dataclass
class Eqn:
    """One equation: outputs = primitive(inputs; params). `source` is the user's line."""

    prim: object  # nova.core.primitive.Primitive
    inputs: list
    params: dict
    outputs: list
    source: str | None = None
    stage: str = "fwd"  # "bwd" for equations that reverse mode appended (not printed or hashed)


@dataclass
class Program:
    """inputs -> eqns -> outputs. Value semantics: every Var is defined exactly once."""

    inputs: list
    eqns: list
    outputs: list
    input_names: list = field(default_factory=list)

    def __str__(self):
        return print_program(self)

    def as_text(self, *, debug_info: bool = True) -> str:
        return print_program(self, debug_info=debug_info)

    def structural_hash(self) -> str:
        """sha256 of the canonical text (values renamed in order, no source locations)."""
        return hashlib.sha256(print_program(self, debug_info=False).encode()).hexdigest()

    def verify(self) -> None:
        verify_program(self)

    def saved_for_backward_bytes(self) -> int:
        """Bytes of values computed by forward equations and read by backward ones."""
        fwd = {id(o): o for e in self.eqns if e.stage == "fwd" for o in e.outputs}
        used = {id(v) for e in self.eqns if e.stage == "bwd" for v in e.inputs}
        return sum(v.type.nbytes for k, v in fwd.items() if k in used)

    def count(self, name: str) -> int:
        """How many equations apply the primitive called `name`."""
        return sum(1 for e in self.eqns if e.prim.name == name)


class Region:
    """A Program held as a parameter of an equation: a loop's body or condition, a branch of a
    `cond` (nova/control_flow.py). Closed: it reads only its own inputs. Equal and hashed by its
    canonical text (the structural hash), so equations holding equal regions are equal (cse,
    the eager cache); printed as a string attribute holding that text, which parses back."""

    __slots__ = ("_text", "dropped_rules", "program", "replay")

    def __init__(self, program: Program, dropped_rules: bool = False,
                 replay: Program | None = None):
        self.program = program
        self._text = None
        # True when the function traced into it called custom_vjp/custom_jvp functions, whose
        # rules `program` does not keep. `replay`, when given, is the same Program with the
        # rules' markers kept (the inputs are the same Vars), which transforms replay so that
        # they meet the rules; without it control_flow.py refuses to differentiate the Region.
        # Neither is part of the Region's text, hash or equality (the compiled program).
        self.dropped_rules = dropped_rules
        self.replay = replay

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = print_program(self.program, debug_info=False)
        return self._text

    def __eq__(self, other):
        return isinstance(other, Region) and other.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        p = self.program
        return (f"Region(({', '.join(str(v.type) for v in p.inputs)}) -> "
                f"({', '.join(str(v.type) for v in p.outputs)}), {len(p.eqns)} equations)")


def as_region(v) -> Region:
    """A Region from a Region, a Program or its printed text (a parsed string attribute)."""
    if isinstance(v, Region):
        return v
    if isinstance(v, Program):
        return Region(v)
    if isinstance(v, str):
        return Region(parse_program(v))
    raise TypeError(f"expected a Program region, got {type(v).__name__}")


class IRError(Exception):
    """A Program violates an invariant (SSA, types, unknown op); names the equation."""


class IRParseError(ValueError):
    """Text could not be parsed as a Nova Program; names the line."""


# --- printing -----------------------------------------------------------------------------------


def _fmt_float(x: float) -> str:
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def _fmt_scalar(x, dtype) -> str:
    if dtype == dtypes.bool_:
        return "true" if bool(x) else "false"
    if dtypes.is_float(dtype):
        return _fmt_float(float(x))
    return str(int(x))


class _Printer:
    def __init__(self, debug_info: bool):
        self.names: dict[int, str] = {}
        self.debug_info = debug_info
        self.resources: list[tuple[str, np.ndarray]] = []

    def name(self, v: Var) -> str:
        return self.names[id(v)]

    def define(self, v: Var) -> str:
        if id(v) in self.names:
            raise IRError(f"value {v} is defined twice")
        n = f"%{len(self.names)}"
        self.names[id(v)] = n
        return n

    def attr(self, val) -> str:
        cls = type(val)
        if cls is int:
            return str(val)
        if cls is tuple and all(type(x) is int for x in val):
            return "[" + ", ".join([str(x) for x in val]) + "]"
        if val is None:
            return "none"
        if isinstance(val, bool | np.bool_):
            return "true" if val else "false"
        if isinstance(val, int | np.integer):
            return str(int(val))
        if isinstance(val, float | np.floating):
            return _fmt_float(float(val))
        if isinstance(val, Region):
            return self.attr(val.text)
        if isinstance(val, str):
            return '"' + val.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        if isinstance(val, np.dtype):
            return dtypes.MLIR_NAME[val]
        if isinstance(val, tuple | list):
            return "[" + ", ".join(self.attr(v) for v in val) + "]"
        if isinstance(val, np.ndarray):
            t = TensorType(val.shape, val.dtype)
            if val.size <= INLINE_CONSTANT_LIMIT and val.dtype.kind != "c":  # complex: resources
                flat = val.reshape(-1)
                if val.ndim > 0 and val.size > 0 and np.all(flat == flat[0]) and val.size > 1:
                    body = _fmt_scalar(flat[0], val.dtype)
                elif val.ndim == 0:
                    body = _fmt_scalar(val[()], val.dtype)
                else:
                    body = "[" + ", ".join(_fmt_scalar(x, val.dtype) for x in flat) + "]"
                return f"dense<{body}> : {t}"
            key = f"__nova_c{len(self.resources)}"
            self.resources.append((key, val))
            return f"dense_resource<{key}> : {t}"
        if isinstance(val, TensorType):  # a type attribute (a callback's declared results)
            return str(val)
        text = getattr(val, "ir_attr", None)  # an object that prints itself (a HostCallback)
        if text is not None:
            return self.attr(text)
        raise IRError(f"cannot print attribute of type {type(val).__name__}: {val!r}")

    def eqn(self, e: Eqn) -> str:
        names = self.names
        ins = ", ".join([names[id(v)] for v in e.inputs])
        outs = ", ".join([self.define(v) for v in e.outputs])
        attrs = ""
        if e.params:
            attrs = (
                " {" + ", ".join([f"{k} = {self.attr(v)}" for k, v in sorted(e.params.items())])
                + "}"
            )
        in_t = "(" + ", ".join([v.type._text for v in e.inputs]) + ")"
        outputs = e.outputs
        if len(outputs) == 1:
            out_t = outputs[0].type._text
        else:
            out_t = "(" + ", ".join([v.type._text for v in outputs]) + ")"
        sep = " " if ins else ""
        line = f"{outs} = nova.{e.prim.name}{sep}{ins}{attrs} : {in_t} -> {out_t}"
        if self.debug_info and e.source:
            file, _, lineno = e.source.rpartition(":")
            line += f' loc("{file}":{lineno})' if lineno.isdigit() else f' loc("{e.source}")'
        return line


def print_program(p: Program, *, debug_info: bool = True) -> str:
    pr = _Printer(debug_info)
    args = ", ".join(f"{pr.define(v)}: {v.type}" for v in p.inputs)
    out_ts = ", ".join(str(v.type) for v in p.outputs)
    lines = [f"func.func @main({args}) -> ({out_ts}) {{"]
    for e in p.eqns:
        lines.append("  " + pr.eqn(e))
    outs = ", ".join(pr.name(v) for v in p.outputs)
    lines.append(f"  return {outs} : {out_ts}" if p.outputs else "  return")
    lines.append("}")
    if pr.resources:
        lines.append("{-#\n  dialect_resources: {\n    builtin: {")
        entries = []
        for key, val in pr.resources:
            blob = np.ascontiguousarray(val).tobytes()
            # MLIR blob encoding: a 4-byte little-endian alignment, then the raw bytes, in hex.
            hexdata = (4).to_bytes(4, "little").hex().upper() + blob.hex().upper()
            entries.append(f'      {key}: "0x{hexdata}"')
        lines.append(",\n".join(entries))
        lines.append("    }\n  }\n#-}")
    return "\n".join(lines) + "\n"


# --- parsing ------------------------------------------------------------------------------------

# A tensor type's body may nest one level of angle brackets (`tensor<4xcomplex<f32>>`).
_TENSOR = r"tensor<(?:[^<>]|<[^<>]*>)*>"
_TYPE_RE = re.compile(r"tensor<((?:[^<>]|<[^<>]*>)*)>")
_TOKEN_RE = re.compile(
    r'\s*(?:(dense_resource<[\w.]+>\s*:\s*' + _TENSOR + r')|(dense<[^>]*>\s*:\s*' + _TENSOR + r')'
    r'|("(?:[^"\\]|\\.)*")|([\[\],{}=])|([-+\w.]+))'
)


def parse_type(text: str) -> TensorType:
    m = _TYPE_RE.fullmatch(text.strip())
    if not m:
        raise IRParseError(f"expected a tensor type, got {text!r}")
    body = m.group(1)
    if body.endswith(">"):  # complex<f32>: the element type itself holds an "x"
        cut = body.rfind("complex<")
        parts = body[:cut].split("x")[:-1] + [body[cut:]] if cut >= 0 else [body]
    else:
        parts = body.split("x")
    el = parts[-1]
    if el not in dtypes.FROM_MLIR:
        raise IRParseError(f"unknown element type {el!r} in {text!r}")
    try:
        shape = tuple(int(d) for d in parts[:-1])
    except ValueError as e:
        raise IRParseError(f"bad shape in {text!r}") from e
    return TensorType(shape, dtypes.FROM_MLIR[el])


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets, braces, angle brackets and quotes."""
    out, depth, cur, quote = [], 0, [], False
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == '"':
                quote = False
            continue
        if ch == '"':
            quote = True
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _parse_scalar_word(w: str):
    if w == "true":
        return True
    if w == "false":
        return False
    if w == "none":
        return None
    if w in dtypes.FROM_MLIR:
        return dtypes.FROM_MLIR[w]
    if w in ("inf", "+inf"):
        return float("inf")
    if w == "-inf":
        return float("-inf")
    if w == "nan":
        return float("nan")
    if re.fullmatch(r"[-+]?\d+", w):
        return int(w)
    try:
        return float(w)
    except ValueError:
        raise IRParseError(f"bad attribute value {w!r}") from None


def _parse_dense(text: str, resources: dict) -> np.ndarray:
    body, _, ty = text.rpartition(":")
    t = parse_type(ty)
    body = body.strip()
    if body.startswith("dense_resource<"):
        key = body[len("dense_resource<") : -1]
        if key not in resources:
            raise IRParseError(f"missing resource {key!r}")
        raw = bytes.fromhex(resources[key][2:])[4:]
        return np.frombuffer(raw, dtype=t.dtype).reshape(t.shape).copy()
    inner = body[len("dense<") : -1].strip()
    if inner.startswith("["):
        words = [w.strip() for w in inner[1:-1].split(",") if w.strip()]
        vals = [_parse_scalar_word(w) for w in words]
        return np.array(vals, dtype=t.dtype).reshape(t.shape)
    return np.full(t.shape, _parse_scalar_word(inner), dtype=t.dtype)


def _parse_attr(tokens: list, i: int, resources: dict):
    tok = tokens[i]
    if tok == "[":
        items, i = [], i + 1
        while tokens[i] != "]":
            val, i = _parse_attr(tokens, i, resources)
            items.append(val)
            if tokens[i] == ",":
                i += 1
        return tuple(items), i + 1
    if tok.startswith("dense"):
        return _parse_dense(tok, resources), i + 1
    if tok.startswith('"'):
        return bytes(tok[1:-1], "utf-8").decode("unicode_escape"), i + 1
    return _parse_scalar_word(tok), i + 1


def _parse_attr_dict(text: str, resources: dict) -> dict:
    tokens = [next(g for g in m.groups() if g is not None) for m in _TOKEN_RE.finditer(text)]
    if not tokens or tokens[0] != "{" or tokens[-1] != "}":
        raise IRParseError(f"bad attribute dictionary {text!r}")
    out, i = {}, 1
    while tokens[i] != "}":
        key = tokens[i]
        if tokens[i + 1] != "=":
            raise IRParseError(f"expected '=' after {key!r} in {text!r}")
        out[key], i = _parse_attr(tokens, i + 2, resources)
        if tokens[i] == ",":
            i += 1
    return out


def _parse_resources(text: str) -> dict:
    return dict(re.findall(r'(\w+):\s*"(0x[0-9A-Fa-f]*)"', text))


_EQN_RE = re.compile(
    r"^(?P<outs>%[\w, %]+?)\s*=\s*nova\.(?P<op>\w+)(?P<ins>(?:\s+%\w+(?:\s*,\s*%\w+)*)?)"
    r"(?P<attrs>\s*\{.*\})?\s*:\s*\((?P<in_t>.*?)\)\s*->\s*(?P<out_t>.+?)"
    r'(?:\s+loc\("(?P<file>[^"]*)"(?::(?P<line>\d+))?\))?$'
)


def parse_program(text: str) -> Program:
    """Parses the text printed by `print_program` back into a Program (then verifies it)."""
    from nova.core.primitive import lookup

    # The resources block starts a line (a region's text, a string attribute, holds its own
    # block on the equation's one line).
    m = re.search(r"^\{-#", text, re.MULTILINE)
    res_start = m.start() if m else -1
    resources = _parse_resources(text[res_start:]) if res_start >= 0 else {}
    body = text[:res_start] if res_start >= 0 else text
    lines = [ln.strip() for ln in body.strip().splitlines() if ln.strip()]
    if not lines or not lines[0].startswith("func.func @main("):
        raise IRParseError("expected 'func.func @main(' on the first line")
    env: dict[str, Var] = {}
    head = lines[0]
    arg_text = head[len("func.func @main(") : head.index(") -> (")]
    inputs = []
    for a in _split_top(arg_text):
        name, _, ty = a.partition(":")
        v = Var(parse_type(ty))
        env[name.strip()] = v
        inputs.append(v)
    eqns, outputs = [], []
    for lineno, ln in enumerate(lines[1:], start=2):
        if ln == "}":
            break
        if ln.startswith("return"):
            names = ln[len("return") :].partition(":")[0]
            for n in _split_top(names):
                if n not in env:
                    raise IRParseError(f"line {lineno}: undefined value {n}")
                outputs.append(env[n])
            continue
        m = _EQN_RE.match(ln)
        if not m:
            raise IRParseError(f"line {lineno}: cannot parse {ln!r}")
        prim = lookup(m.group("op"))
        ins = []
        for n in _split_top(m.group("ins") or ""):
            if n not in env:
                raise IRParseError(f"line {lineno}: undefined value {n}")
            ins.append(env[n])
        params = _parse_attr_dict(m.group("attrs").strip(), resources) if m.group("attrs") else {}
        out_t = m.group("out_t").strip()
        out_types = _split_top(out_t[1:-1]) if out_t.startswith("(") else [out_t]
        out_names = _split_top(m.group("outs"))
        if len(out_names) != len(out_types):
            raise IRParseError(f"line {lineno}: {len(out_names)} results but {len(out_types)} types")
        outs = []
        for n, t in zip(out_names, out_types, strict=True):
            v = Var(parse_type(t))
            env[n] = v
            outs.append(v)
        src = None
        if m.group("file") is not None:
            src = m.group("file") + (f":{m.group('line')}" if m.group("line") else "")
        eqns.append(Eqn(prim, ins, prim.canonical_params(params), outs, src))
    p = Program(inputs, eqns, outputs)
    verify_program(p)
    return p


# --- verification -------------------------------------------------------------------------------


def verify_program(p: Program, *, pass_name: str | None = None) -> None:
    """Checks SSA form and that every equation's result types follow its primitive's shape rule."""
    where = f" (after pass {pass_name})" if pass_name else ""
    defined = set()
    for v in p.inputs:
        if id(v) in defined:
            raise IRError(f"input {v} appears twice{where}")
        defined.add(id(v))
    for k, e in enumerate(p.eqns):
        for v in e.inputs:
            if id(v) not in defined:
                raise IRError(
                    f"equation {k} (nova.{e.prim.name}) uses a value before its definition{where}"
                )
        try:
            expected = e.prim.abstract_eval([v.type for v in e.inputs], **e.params)
        except Exception as ex:  # noqa: BLE001 - rethrown with the equation named
            raise IRError(f"equation {k} (nova.{e.prim.name}) fails its shape rule{where}: {ex}")
        if not isinstance(expected, tuple | list):
            expected = [expected]
        got = [v.type for v in e.outputs]
        if list(expected) != got:
            raise IRError(
                f"equation {k} (nova.{e.prim.name}): result types {got} but the shape rule "
                f"gives {list(expected)}{where}"
            )
        for v in e.outputs:
            if id(v) in defined:
                raise IRError(f"equation {k} (nova.{e.prim.name}) redefines a value{where}")
            defined.add(id(v))
    for v in p.outputs:
        if id(v) not in defined:
            raise IRError(f"program output {v} is never defined{where}")
