"""Constant folding: the value an expression has before the program runs.

A policy that has read the detectors builds the names it hides ("_py" + "test", chr() lists,
base64/zlib/rot13 payloads, f-strings, paths from __file__, a data file read beside the code);
folding undoes those spellings within fixed bounds, and anything it cannot work out is UNKNOWN_VALUE.
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import codecs
import lzma
import posixpath
import re
import zlib
from dataclasses import dataclass
from typing import Any

from rewards.anticheat.files import read_bounded
from rewards.anticheat.patterns import MAX_FOLD_STEPS, MAX_FOLDED, READERS, TEXT_ENCODINGS, WORKSPACE
from rewards.anticheat.source import Source


class _Unknown:
    """A value constant folding could not work out."""


UNKNOWN_VALUE = _Unknown()


class FileText(str):
    """Text folded from a data file of the workspace."""


class FileBytes(bytes):
    """Bytes folded from a data file of the workspace."""


@dataclass(frozen=True)
class _OpenFile:
    path: str
    binary: bool


def _module_name(rel: str) -> str:
    parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Folding(Source):
    """A source whose expressions can be folded to constants."""

    def fold_str(self, node: ast.AST) -> str | None:
        value = self.fold(node)
        if isinstance(value, bytes):
            try:
                return value.decode()
            except UnicodeDecodeError:
                return None
        return value if isinstance(value, str) else None

    def fold(self, node: ast.AST) -> Any:
        key = id(node)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = UNKNOWN_VALUE  # a name defined through itself folds to nothing
        self.fold_steps += 1
        if self.fold_steps > MAX_FOLD_STEPS:
            return UNKNOWN_VALUE
        try:
            value = self._fold(node)
        except (ArithmeticError, AttributeError, LookupError, RecursionError, TypeError, ValueError, zlib.error):
            value = UNKNOWN_VALUE
        except (OSError, lzma.LZMAError):
            value = UNKNOWN_VALUE
        if isinstance(value, str | bytes) and len(value) > MAX_FOLDED:
            value = UNKNOWN_VALUE
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**64:
            value = UNKNOWN_VALUE
        self.memo[key] = value
        return value

    def _fold(self, node: ast.AST) -> Any:  # noqa: C901 - one case per kind of expression
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._fold_name(node.id)
        if isinstance(node, ast.List | ast.Tuple):
            items = [self.fold(e) for e in node.elts]
            return UNKNOWN_VALUE if any(i is UNKNOWN_VALUE for i in items) else items
        if isinstance(node, ast.BinOp):
            return self._fold_binop(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Invert):
            operand = self.fold(node.operand)
            if not isinstance(operand, int) or isinstance(operand, bool):
                return UNKNOWN_VALUE
            return (
                -operand
                if isinstance(node.op, ast.USub)
                else (~operand if isinstance(node.op, ast.Invert) else operand)
            )
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                elif isinstance(value, ast.FormattedValue):
                    inner = self.fold(value.value)
                    spec = self.fold_str(value.format_spec) if value.format_spec else ""
                    if inner is UNKNOWN_VALUE or spec is None or re.search(r"\d{4,}", spec):
                        return UNKNOWN_VALUE
                    if value.conversion == ord("r"):
                        inner = repr(inner)
                    parts.append(format(inner, spec))
            return "".join(parts)
        if isinstance(node, ast.Subscript):
            return self._fold_subscript(node)
        if isinstance(node, ast.Attribute) and node.attr in ("parent", "name", "stem", "suffix"):
            path = self.fold_str(node.value)
            if path is None:
                return UNKNOWN_VALUE
            pure = posixpath.normpath(path)
            if node.attr == "parent":
                return posixpath.dirname(pure)
            base = posixpath.basename(pure)
            return {"name": base, "stem": posixpath.splitext(base)[0], "suffix": posixpath.splitext(base)[1]}[node.attr]
        if isinstance(node, ast.Call):
            return self._fold_call(node)
        return UNKNOWN_VALUE

    def _fold_name(self, name: str) -> Any:
        if name == "__file__":
            return f"{WORKSPACE}/{self.rel}"
        if name == "__name__":
            return _module_name(self.rel)
        value = self.consts.get(name)
        if value is None or name in self.folding:
            return UNKNOWN_VALUE
        self.folding.add(name)
        try:
            return self.fold(value)
        finally:
            self.folding.discard(name)

    def _fold_binop(self, node: ast.BinOp) -> Any:
        if isinstance(node.op, ast.Add):
            # Long chains ("_" + "p" + "y" + ...) nest to the left: walk them without
            # recursion, and remember every partial sum so that each link is folded once.
            spine: list[ast.BinOp] = [node]
            current: ast.expr = node.left
            while isinstance(current, ast.BinOp) and isinstance(current.op, ast.Add) and id(current) not in self.memo:
                spine.append(current)
                current = current.left
            total = self.fold(current)
            for link in reversed(spine):
                right = self.fold(link.right) if total is not UNKNOWN_VALUE else UNKNOWN_VALUE
                if right is UNKNOWN_VALUE:
                    total = UNKNOWN_VALUE
                else:
                    total = total + right
                    if isinstance(total, str | bytes | list) and len(total) > MAX_FOLDED:
                        total = UNKNOWN_VALUE
                self.memo[id(link)] = total
            return total
        left, right = self.fold(node.left), self.fold(node.right)
        if left is UNKNOWN_VALUE or right is UNKNOWN_VALUE:
            return UNKNOWN_VALUE
        if isinstance(node.op, ast.Mult):
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, str | bytes | list) and isinstance(count, int):
                    return seq * count if len(seq) * max(count, 0) <= MAX_FOLDED else UNKNOWN_VALUE
            return left * right if isinstance(left, int) and isinstance(right, int) else UNKNOWN_VALUE
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            if re.search(r"%[-+ #0]*(\*|\d{4,})|%[-+ #0]*\d*\.(\*|\d{4,})", left):
                return UNKNOWN_VALUE
            return left % (tuple(right) if isinstance(right, list) else right)
        if isinstance(node.op, ast.Sub) and isinstance(left, int) and isinstance(right, int):
            return left - right
        if isinstance(node.op, ast.BitXor) and isinstance(left, int) and isinstance(right, int):
            return left ^ right
        if isinstance(node.op, ast.Div) and isinstance(left, str) and isinstance(right, str):
            return posixpath.join(left, right)  # pathlib's `/`
        return UNKNOWN_VALUE

    def _fold_subscript(self, node: ast.Subscript) -> Any:
        if isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
            path, index = self.fold_str(node.value.value), self.fold(node.slice)
            if path is None or not isinstance(index, int) or not 0 <= index < 64:
                return UNKNOWN_VALUE
            path = posixpath.normpath(path)
            for _ in range(index + 1):
                path = posixpath.dirname(path)
            return path
        value = self.fold(node.value)
        if value is UNKNOWN_VALUE:
            return UNKNOWN_VALUE
        if isinstance(node.slice, ast.Slice):
            bounds = [
                self.fold(p) if p is not None else None for p in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            if any(b is UNKNOWN_VALUE for b in bounds):
                return UNKNOWN_VALUE
            return value[slice(*bounds)]
        index = self.fold(node.slice)
        return UNKNOWN_VALUE if index is UNKNOWN_VALUE else value[index]

    def _fold_call(self, node: ast.Call) -> Any:  # noqa: C901 - one case per decoder or builder
        func = self.qual(node.func)
        args = [self.fold(a) for a in node.args] if not any(isinstance(a, ast.Starred) for a in node.args) else None
        if args is None or any(a is UNKNOWN_VALUE for a in args):
            if func in ("builtins.map",) or (isinstance(node.func, ast.Attribute) and node.func.attr == "join"):
                pass  # join/map take iterables folded below
            else:
                return UNKNOWN_VALUE
        args = args or []
        if isinstance(node.func, ast.Attribute) and func is None:
            return self._fold_method(node, node.func.attr, args)
        if func == "builtins.chr" and len(args) == 1 and isinstance(args[0], int):
            return chr(args[0])
        if func == "builtins.str" and len(args) == 1:
            return args[0] if isinstance(args[0], str) else UNKNOWN_VALUE
        if func in ("builtins.bytes", "builtins.bytearray") and len(args) == 1 and isinstance(args[0], list):
            return bytes(args[0])
        if func in ("builtins.bytes",) and len(args) == 2 and isinstance(args[0], str):
            return args[0].encode(self._encoding(args[1]))
        if func in ("builtins.map",) and len(node.args) == 2:
            inner = self.qual(node.args[0])
            items = self.fold(node.args[1])
            if inner == "builtins.chr" and isinstance(items, list | str | bytes):
                return [chr(i) for i in items] if not isinstance(items, str) else UNKNOWN_VALUE
            if inner == "builtins.str" and isinstance(items, list):
                return [str(i) for i in items]
            return UNKNOWN_VALUE
        if func in ("builtins.reversed",) and len(args) == 1 and isinstance(args[0], str | list):
            return list(reversed(args[0]))
        if func in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "os.fspath", "os.path.normpath"):
            return posixpath.join(*args) if all(isinstance(a, str) for a in args) else UNKNOWN_VALUE
        if func in ("os.path.join", "posixpath.join") and args and all(isinstance(a, str) for a in args):
            return posixpath.join(*args)
        if func in ("os.path.dirname", "posixpath.dirname") and len(args) == 1 and isinstance(args[0], str):
            return posixpath.dirname(args[0])
        if func in ("os.path.abspath", "os.path.realpath") and len(args) == 1 and isinstance(args[0], str):
            return posixpath.normpath(posixpath.join(WORKSPACE, args[0]))
        if func in ("os.getcwd", "pathlib.Path.cwd"):
            return WORKSPACE
        if func in ("pathlib.Path.home", "os.path.expanduser") and not args:
            return "/home/user"
        if func == "os.path.expanduser" and len(args) == 1 and isinstance(args[0], str):
            return "/home/user" + args[0][1:] if args[0].startswith("~") else args[0]
        if func in READERS and args and isinstance(args[0], str):
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            return _OpenFile(args[0], "b" in mode)
        if func is not None and len(args) >= 1:
            return self._fold_decoder(func, args)
        return UNKNOWN_VALUE

    def _fold_method(self, node: ast.Call, method: str, args: list[Any]) -> Any:  # noqa: C901
        assert isinstance(node.func, ast.Attribute)
        if method == "join" and len(node.args) == 1:
            sep, items = self.fold(node.func.value), self._fold_iterable(node.args[0])
            if isinstance(sep, str) and isinstance(items, list) and all(isinstance(i, str) for i in items):
                return sep.join(items)
            if isinstance(sep, bytes) and isinstance(items, list) and all(isinstance(i, bytes) for i in items):
                return sep.join(items)
            return UNKNOWN_VALUE
        target = self.fold(node.func.value)
        if target is UNKNOWN_VALUE:
            return UNKNOWN_VALUE
        if isinstance(target, _OpenFile) and method == "read":
            return self._read_workspace(target.path, target.binary)
        if isinstance(target, str) and method in ("read_text", "read_bytes", "open"):
            if method == "open":
                return _OpenFile(target, "b" in (args[0] if args and isinstance(args[0], str) else "r"))
            return self._read_workspace(target, method == "read_bytes")
        if isinstance(target, str) and method in ("joinpath",) and all(isinstance(a, str) for a in args):
            return posixpath.join(target, *args)
        if isinstance(target, str) and method == "with_name" and len(args) == 1 and isinstance(args[0], str):
            return posixpath.join(posixpath.dirname(target), args[0])
        if isinstance(target, str) and method in ("resolve", "absolute", "as_posix", "expanduser") and not args:
            if method == "expanduser" and target.startswith("~"):
                return "/home/user" + target[1:]
            return target if target.startswith(("/", WORKSPACE)) else posixpath.join(WORKSPACE, target)
        if isinstance(target, bytes) and method == "decode":
            return target.decode(self._encoding(args[0] if args else "utf-8"))
        if isinstance(target, str) and method == "encode":
            return target.encode(self._encoding(args[0] if args else "utf-8"))
        if isinstance(target, str | bytes) and method in ("upper", "lower", "strip", "lstrip", "rstrip", "title"):
            return getattr(target, method)(*args) if len(args) <= 1 else UNKNOWN_VALUE
        if isinstance(target, str | bytes) and method == "replace" and len(args) == 2:
            old, new = args
            fits = isinstance(new, str | bytes) and len(target) * (len(new) + 1) <= MAX_FOLDED
            if fits and isinstance(target, str) and isinstance(old, str) and isinstance(new, str) and old:
                return target.replace(old, new)
            if fits and isinstance(target, bytes) and isinstance(old, bytes) and isinstance(new, bytes) and old:
                return target.replace(old, new)
            return UNKNOWN_VALUE
        if isinstance(target, str) and method == "format":
            # Fields may only be positions: `{0.attr}` and `{0[key]}` would run code on our values.
            if re.search(r"\{[^}]*([.\[]|:[^}]*\d{4,}|\{)", target):
                return UNKNOWN_VALUE
            return target.format(*args)
        return UNKNOWN_VALUE

    def _fold_iterable(self, node: ast.expr) -> Any:
        if isinstance(node, ast.GeneratorExp | ast.ListComp) and len(node.generators) == 1:
            gen = node.generators[0]
            items = self.fold(gen.iter)
            if gen.ifs or not isinstance(gen.target, ast.Name) or not isinstance(items, list | str | bytes):
                return UNKNOWN_VALUE
            if len(items) > 10_000:
                return UNKNOWN_VALUE
            name = gen.target.id
            saved = self.consts.get(name)
            # The element depends on the bound name: its folded values are per item.
            element = [id(n) for n in ast.walk(node.elt)]
            out = []
            try:
                for item in items:
                    self.consts[name] = ast.Constant(value=item)
                    for key in element:
                        self.memo.pop(key, None)
                    out.append(self.fold(node.elt))
            finally:
                if saved is None:
                    self.consts.pop(name, None)
                else:
                    self.consts[name] = saved
                for key in element:
                    self.memo.pop(key, None)
            return UNKNOWN_VALUE if any(o is UNKNOWN_VALUE for o in out) else out
        value = self.fold(node)
        return list(value) if isinstance(value, str) else value

    @staticmethod
    def _encoding(value: Any) -> str:
        name = str(value).lower().replace("-", "_")
        if name not in TEXT_ENCODINGS:
            raise LookupError(name)
        return name

    def _fold_decoder(self, func: str, args: list[Any]) -> Any:
        data = args[0]
        if isinstance(data, str) and func.startswith(("base64.", "binascii.")):
            data = data.encode("ascii")
        if func in (
            "base64.b64decode",
            "base64.standard_b64decode",
            "base64.decodebytes",
            "binascii.a2b_base64",
        ) and isinstance(data, bytes):
            return base64.b64decode(data)
        if func == "base64.urlsafe_b64decode" and isinstance(data, bytes):
            return base64.urlsafe_b64decode(data)
        if func == "base64.b32decode" and isinstance(data, bytes):
            return base64.b32decode(data)
        if func == "base64.b16decode" and isinstance(data, bytes):
            return base64.b16decode(data)
        if func in ("base64.b85decode",) and isinstance(data, bytes):
            return base64.b85decode(data)
        if func in ("base64.a85decode",) and isinstance(data, bytes):
            return base64.a85decode(data)
        if func in ("binascii.unhexlify", "binascii.a2b_hex") and isinstance(data, bytes):
            return binascii.unhexlify(data)
        if func == "builtins.bytes.fromhex" and isinstance(data, str):
            return bytes.fromhex(data)
        if func == "zlib.decompress" and isinstance(data, bytes):
            return zlib.decompressobj().decompress(data, MAX_FOLDED)
        if func == "bz2.decompress" and isinstance(data, bytes):
            return bz2.BZ2Decompressor().decompress(data, max_length=MAX_FOLDED)
        if func == "lzma.decompress" and isinstance(data, bytes):
            return lzma.LZMADecompressor().decompress(data, max_length=MAX_FOLDED)
        if func in ("codecs.decode", "codecs.encode") and len(args) == 2 and isinstance(args[1], str):
            codec = args[1].lower().replace("-", "_")
            if codec in ("rot13", "rot_13") and isinstance(data, str):
                return codecs.decode(data, "rot13")
            if codec in ("base64", "base_64", "hex", "hex_codec") and isinstance(data, str | bytes):
                raw = data.encode() if isinstance(data, str) else data
                return base64.b64decode(raw) if codec.startswith("base") else binascii.unhexlify(raw)
            if codec in ("zlib", "zlib_codec") and isinstance(data, bytes):
                return zlib.decompressobj().decompress(data, MAX_FOLDED)
            if isinstance(data, bytes):
                return data.decode(self._encoding(codec))
        return UNKNOWN_VALUE

    def _read_workspace(self, path: str, binary: bool) -> Any:
        """A data file's content, so that a payload kept beside the code is scanned too."""
        if self.root is None:
            return UNKNOWN_VALUE
        full = path if path.startswith(WORKSPACE) else posixpath.join(WORKSPACE, path)
        full = posixpath.normpath(full)
        if not full.startswith(WORKSPACE + "/"):
            return UNKNOWN_VALUE
        data = read_bounded(self.root, full[len(WORKSPACE) + 1 :], MAX_FOLDED)
        if data is None:
            return UNKNOWN_VALUE
        return FileBytes(data) if binary else FileText(data.decode("utf-8", "replace"))
