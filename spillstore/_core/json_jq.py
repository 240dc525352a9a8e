"""The common jq subset, parsed to a small syntax tree. Pure: no I/O.

``query_spill`` evaluates most expressions natively on the document it already parsed
(:mod:`~spillstore._core.json_eval`), and hands everything else to the jq binding. This
module reads the subset: paths (``.a``, ``."a b"``, ``.[0]``, ``.[]``, ``..``, ``?``),
``|``, ``,``, literals, ``(...)``, array and object construction, comparisons,
``and``/``or``, ``//``, ``+ - * / %``, ``if ... then ... elif ... else ... end``,
``try E`` (without ``catch``), ``E as $name | ...`` and calls of the builtins the
evaluator knows. Anything else (``def``, ``reduce``, string interpolation, slices,
formats, assignment, a syntax error) raises :class:`Unsupported`, and jq itself runs
the expression: jq decides what it means, and words its errors.

The tree is nested tuples, first item the node's kind, e.g. ``("pipe", left, right)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from spillstore._errors import SpillstoreError

__all__ = ["MAX_EXPRESSION_CHARS", "Unsupported", "parse_jq"]

MAX_EXPRESSION_CHARS = 4096
"""A longer expression is left to jq (it bounds this parser's recursion)."""

_MAX_DEPTH = 64
"""Nesting deeper than this is left to jq."""

Node = tuple[Any, ...]


class Unsupported(SpillstoreError):
    # A signal inside the query engine, never an error the user sees.
    """The expression (or, raised by the evaluator, one of its steps on the actual
    input) is outside the native subset: jq runs it instead."""


_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: what a `\\uD800` escape without its pair decodes to."""

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
    |(?P<string>"(?:[^"\\]|\\.)*")
    |(?P<field>\.[A-Za-z_][A-Za-z0-9_]*)
    |(?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
    |(?P<var>\$[A-Za-z_][A-Za-z0-9_]*)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>\.\.|!=|==|<=|>=|//|\?//|[|,+\-*/%<>()\[\]{}:;?.=@])
    """,
    re.VERBOSE | re.DOTALL,
)

_KEYWORDS = frozenset(
    ("as", "def", "if", "then", "elif", "else", "end", "and", "or", "reduce", "foreach")
) | frozenset(("try", "catch", "label", "import", "include", "__loc__"))
_COMPARISONS = frozenset(("==", "!=", "<", "<=", ">", ">="))
_LITERALS = {"true": True, "false": False, "null": None}


def _tokens(expression: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if match is None:
            raise Unsupported(f"character {expression[pos]!r}")
        pos = match.end()
        kind = match.lastgroup
        text = match.group()
        if kind == "space":
            continue
        if kind == "string":
            if "\\(" in text:
                raise Unsupported("string interpolation")
            try:
                value = json.loads(text)
            except ValueError:
                raise Unsupported("a string jq reads differently") from None
            if _SURROGATE.search(value):  # a \uD800 escape without its pair: jq refuses it
                raise Unsupported("a string jq reads differently")
            out.append(("string", value))
        elif kind == "number":
            if text.startswith("."):
                raise Unsupported("a number starting with a dot")
            is_int = text.isdigit()
            out.append(("number", int(text) if is_int else float(text)))
        elif kind == "field":
            out.append(("field", text[1:]))
        elif kind == "var":
            out.append(("var", text[1:]))
        elif kind == "ident":
            if pos < len(expression) and expression.startswith("::", pos):
                raise Unsupported("a module path")
            out.append(("ident", text))
        else:
            out.append(("op", text))
    out.append(("end", None))
    return out


class _Parser:
    """Recursive descent over the tokens, jq's precedence from lowest to highest:
    ``|``, ``,``, ``//``, ``or``, ``and``, comparisons, ``+ -``, ``* / %``, postfix."""

    def __init__(self, expression: str) -> None:
        self.tokens = _tokens(expression)
        self.pos = 0
        self.depth = 0
        self.segment = 0  # where the current pipe segment starts

    def peek(self) -> tuple[str, Any]:
        return self.tokens[self.pos]

    def take(self) -> tuple[str, Any]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def accept(self, kind: str, value: Any = None) -> bool:
        token = self.tokens[self.pos]
        if token[0] == kind and (value is None or token[1] == value):
            self.pos += 1
            return True
        return False

    def expect(self, kind: str, value: Any = None) -> None:
        if not self.accept(kind, value):
            raise Unsupported(f"expected {value or kind}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise Unsupported("nested too deeply")

    def pipe(self) -> Node:
        self.enter()
        outer, self.segment = self.segment, self.pos
        node = self.comma()
        self.segment = outer
        if self.accept("op", "|"):
            node = ("pipe", node, self.pipe())
        self.depth -= 1
        return node

    def left_assoc(self, operand: Callable[[], Node], token: tuple[str, str], tag: str) -> Node:
        """``operand (token operand)*``, grouped from the left."""
        node = operand()
        while self.accept(*token):
            node = (tag, node, operand())
        return node

    def comma(self) -> Node:
        return self.left_assoc(self.alternative, ("op", ","), "comma")

    def alternative(self) -> Node:
        node = self.disjunction()
        if self.accept("op", "//"):
            return ("alt", node, self.alternative())
        return node

    def disjunction(self) -> Node:
        return self.left_assoc(self.conjunction, ("ident", "or"), "or")

    def conjunction(self) -> Node:
        return self.left_assoc(self.comparison, ("ident", "and"), "and")

    def comparison(self) -> Node:
        node = self.additive()
        kind, value = self.peek()
        if kind == "op" and value in _COMPARISONS:
            self.pos += 1
            node = ("binop", value, node, self.additive())
            kind, value = self.peek()
            if kind == "op" and value in _COMPARISONS:
                raise Unsupported("chained comparisons")
        return node

    def additive(self) -> Node:
        node = self.multiplicative()
        while self.peek() in (("op", "+"), ("op", "-")):
            node = ("binop", self.take()[1], node, self.multiplicative())
        return node

    def multiplicative(self) -> Node:
        node = self.unary()
        while self.peek() in (("op", "*"), ("op", "/"), ("op", "%")):
            node = ("binop", self.take()[1], node, self.unary())
        return node

    def unary(self) -> Node:
        start = self.pos
        if self.accept("op", "-"):
            return self.binding(("neg", self.postfix(bind=False)), start)
        return self.postfix()

    def binding(self, node: Node, start: int) -> Node:
        """``Term as $name | body``: the body runs to the end of the enclosing pipe. Only
        where the term opens a pipe segment (jq binds more than the term before ``as``
        elsewhere: ``a == b as $x`` binds ``a == b``)."""
        if self.peek() != ("ident", "as"):
            return node
        if start != self.segment:
            raise Unsupported("as after an operator")
        self.pos += 1
        kind, name = self.take()
        if kind != "var":
            raise Unsupported("a destructuring pattern")
        self.expect("op", "|")
        return ("as", node, name, self.pipe())

    def postfix(self, *, bind: bool = True) -> Node:
        self.enter()
        start = self.pos
        node = self.term()
        last = None  # how the last postfix step was applied: "step", "index" or None
        while True:
            kind, value = self.peek()
            if kind == "field":
                self.pos += 1
                node, last = ("pipe", node, ("field", value)), "step"
            elif (kind, value) == ("op", ".") and self.tokens[self.pos + 1][0] == "string":
                self.pos += 1
                node, last = ("pipe", node, ("field", self.take()[1])), "step"
            elif (kind, value) == ("op", ".") and self.tokens[self.pos + 1] == ("op", "["):
                self.pos += 1
            elif (kind, value) == ("op", "["):
                self.pos += 1
                node = self.bracket(node)
                last = "index" if node[0] == "index" else "step"
            elif (kind, value) == ("op", "?"):
                # ``?`` catches the errors of the last step only (``.a.b?`` fails where
                # ``.a`` does; ``.[.a]?`` where ``.a`` does).
                self.pos += 1
                if last == "step":
                    node = ("pipe", node[1], ("try", node[2]))
                elif last == "index":
                    node = ("index", node[1], node[2], True)
                else:
                    node = ("try", node)
                last = None
            else:
                self.depth -= 1
                return self.binding(node, start) if bind else node

    def bracket(self, node: Node) -> Node:
        """After ``[``: ``]`` iterates, ``E]`` indexes (E runs on the term's input)."""
        if self.accept("op", "]"):
            return ("pipe", node, ("iterate",))
        index = self.pipe()
        self.expect("op", "]")
        return ("index", node, index, False)

    def term(self) -> Node:
        kind, value = self.take()
        if kind in {"number", "string"}:
            return ("literal", value)
        if kind == "field":
            return ("field", value)
        if kind == "var":
            return ("var", value)
        if kind == "op":
            if value == ".":
                if self.peek()[0] == "string":
                    return ("field", self.take()[1])
                return ("identity",)
            if value == "..":
                return ("recurse",)
            if value == "(":
                node = self.pipe()
                self.expect("op", ")")
                return node
            if value == "[":
                if self.accept("op", "]"):
                    return ("array", None)
                node = self.pipe()
                self.expect("op", "]")
                return ("array", node)
            if value == "{":
                return self.object()
            raise Unsupported(f"operator {value}")
        if kind == "ident":
            return self.word(value)
        raise Unsupported("the end of the expression")

    def word(self, name: str) -> Node:
        if name in _LITERALS:
            return ("literal", _LITERALS[name])
        if name == "if":
            return self.conditional()
        if name == "try":
            node = ("try", self.postfix())
            if self.peek() == ("ident", "catch"):
                raise Unsupported("try ... catch")
            return node
        if name in _KEYWORDS:
            raise Unsupported(f"keyword {name}")
        args: list[Node] = []
        if self.accept("op", "("):
            args.append(self.pipe())
            while self.accept("op", ";"):
                args.append(self.pipe())
            self.expect("op", ")")
        return ("call", name, tuple(args))

    def conditional(self) -> Node:
        branches = []
        while True:
            condition = self.pipe()
            self.expect("ident", "then")
            branches.append((condition, self.pipe()))
            if not self.accept("ident", "elif"):
                break
        otherwise = self.pipe() if self.accept("ident", "else") else ("identity",)
        self.expect("ident", "end")
        return ("if", tuple(branches), otherwise)

    def object(self) -> Node:
        entries: list[tuple[Node, Node]] = []
        if self.accept("op", "}"):
            return ("object", ())
        while True:
            kind, value = self.take()
            if kind == "var":
                entries.append((("literal", value), ("var", value)))
            else:
                if kind in {"ident", "string"}:
                    key: Node = ("literal", value)
                elif (kind, value) == ("op", "("):
                    key = self.pipe()
                    self.expect("op", ")")
                else:
                    raise Unsupported("an object key")
                if self.accept("op", ":"):
                    entries.append((key, self.object_value()))
                elif key[0] == "literal":
                    entries.append((key, ("field", key[1])))
                else:
                    raise Unsupported("a computed key without a value")
            if self.accept("op", "}"):
                return ("object", tuple(entries))
            self.expect("op", ",")

    def object_value(self) -> Node:
        """An object's value: terms joined by ``|`` (jq's ``ExpD``), a leading ``-``."""
        node = ("neg", self.postfix()) if self.accept("op", "-") else self.postfix()
        if self.accept("op", "|"):
            return ("pipe", node, self.object_value())
        return node


def parse_jq(expression: str) -> Node:
    """The syntax tree of ``expression``.

    Raises:
        Unsupported: the expression is outside the subset (or is not jq at all).
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise Unsupported("a long expression")
    parser = _Parser(expression)
    node = parser.pipe()
    if parser.peek()[0] != "end":
        raise Unsupported(f"unexpected {parser.peek()[1]!r}")
    return node
