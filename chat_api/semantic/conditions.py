"""Access-policy conditions and value templates, evaluated without ``eval``.

Cube writes per-user logic in access policies as small expressions in braces: the condition
``if: "{ userAttributes.origin }"`` and the filter value ``"{ userAttributes.origin }"``
(Cube documentation, "Access policies": conditions and dynamic values). We accept this grammar::

    condition   := "{" expr "}"
    expr        := and_expr (("or" | "||") and_expr)*
    and_expr    := not_expr (("and" | "&&") not_expr)*
    not_expr    := ("not" | "!") not_expr | comparison
    comparison  := operand (("==" | "===" | "!=" | "!==") operand)?
    operand     := reference | string | number | "true" | "false" | "null" | "None"
                 | "(" expr ")"
    reference   := ("userAttributes" | "securityContext") ("." name)+
    string      := '...' | "..."            (no escapes)

A reference to an unset attribute is ``None``. Truthiness is Python's: ``None``, ``""``, ``0``,
``false`` and empty lists are false. ``==`` compares a string with a number by text
(``"5" == 5`` holds), otherwise by value. Anything else (calls, indexing, arithmetic) is a
``ModelError`` when the model is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from chat_api.errors import ModelError

USER_ATTRIBUTES = "userAttributes"
SECURITY_CONTEXT = "securityContext"

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'[^']*'|\"[^\"]*\")|(?P<num>-?\d+(?:\.\d+)?)"
    r"|(?P<op>===|!==|==|!=|&&|\|\||!|\(|\))|(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*))"
)
_TEMPLATE = re.compile(r"\{([^{}]*)\}")
_KEYWORDS = {"or": "||", "and": "&&", "not": "!"}
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None, "None": None}


@dataclass(frozen=True)
class Reference:
    """``userAttributes.x`` or ``securityContext.a.b``: ``root`` and the ``path`` below it."""

    root: str
    path: tuple[str, ...]

    def lookup(self, scope: Scope) -> Any:
        """The referenced value, or ``None`` when any step of the path is unset."""
        value: Any = scope.user_attributes if self.root == USER_ATTRIBUTES else scope.security
        for step in self.path:
            if not isinstance(value, Mapping) or step not in value:
                return None
            value = value[step]
        return value


@dataclass(frozen=True)
class Literal:
    """A constant of a condition (a string, number, boolean or null)."""

    value: Any


@dataclass(frozen=True)
class Not:
    """``NOT operand``."""

    operand: Node


@dataclass(frozen=True)
class BoolOp:
    """``AND``/``OR`` of the operands."""

    op: str
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Compare:
    """A comparison ``left op right``."""

    op: str
    left: Node
    right: Node


Node = Reference | Literal | Not | BoolOp | Compare


@dataclass(frozen=True)
class Scope:
    """What an expression can see: the user's attributes and security context."""

    user_attributes: Mapping[str, str]
    security: Mapping[str, Any]


@dataclass(frozen=True)
class Condition:
    """A parsed condition; ``source`` is the text it came from."""

    source: str
    root: Node

    def evaluate(self, scope: Scope) -> bool:
        """Whether the condition holds for the user described by ``scope``."""
        return bool(_evaluate(self.root, scope))


def parse_condition(text: str) -> Condition:
    """Parse ``"{ expr }"`` (grammar in the module docstring).

    Raises:
        ModelError: the text is not a single braced expression of the grammar.
    """
    match = re.fullmatch(r"\s*\{(.*)\}\s*", text, flags=re.DOTALL)
    if match is None:
        raise ModelError(f"condition {text!r} must be one expression in braces: '{{ ... }}'")
    return Condition(text, _Parser(match.group(1), text).parse())


def template_references(text: str) -> tuple[Reference, ...]:
    """The references inside ``{ ... }`` templates of a filter value; ``()`` for a constant.

    Raises:
        ModelError: a template holds something other than a single reference.
    """
    references = []
    for match in _TEMPLATE.finditer(text):
        node = _Parser(match.group(1), text).parse()
        if not isinstance(node, Reference):
            raise ModelError(
                f"value template {text!r} must hold a userAttributes or securityContext reference"
            )
        references.append(node)
    return tuple(references)


def render_value(text: str, scope: Scope) -> Any:
    """Substitute the templates of a filter value for one user.

    A value that is exactly one template keeps the referenced value's type (a list from the
    security context stays a list); templates inside longer text are replaced by their text.

    Returns:
        The substituted value, or ``None`` when a referenced attribute is unset.
    """
    references = template_references(text)
    if not references:
        return text
    values = [reference.lookup(scope) for reference in references]
    if any(value is None for value in values):
        return None
    if re.fullmatch(r"\s*\{[^{}]*\}\s*", text):
        return values[0]
    parts = iter(str(value) for value in values)
    return _TEMPLATE.sub(lambda _match: next(parts), text)


class _Parser:
    """Recursive-descent parser over the tokens of one expression."""

    def __init__(self, body: str, source: str) -> None:
        self._source = source
        self._tokens = self._tokenize(body)
        self._position = 0

    def parse(self) -> Node:
        node = self._or()
        if self._position != len(self._tokens):
            self._fail(f"unexpected {self._tokens[self._position][1]!r}")
        return node

    def _tokenize(self, body: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        position = 0
        while body[position:].strip():
            match = _TOKEN.match(body, position)
            if match is None or match.lastgroup is None:
                self._fail(f"cannot read {body[position:].strip()!r}")
            kind, value = match.lastgroup, match.group(match.lastgroup)
            if kind == "name" and value in _KEYWORDS:
                kind, value = "op", _KEYWORDS[value]
            tokens.append((kind, value))
            position = match.end()
        return tokens

    def _fail(self, problem: str) -> NoReturn:
        raise ModelError(f"condition {self._source!r}: {problem}")

    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._position] if self._position < len(self._tokens) else None

    def _accept(self, *ops: str) -> str | None:
        token = self._peek()
        if token is not None and token[0] == "op" and token[1] in ops:
            self._position += 1
            return token[1]
        return None

    def _or(self) -> Node:
        operands = [self._and()]
        while self._accept("||"):
            operands.append(self._and())
        return operands[0] if len(operands) == 1 else BoolOp("or", tuple(operands))

    def _and(self) -> Node:
        operands = [self._not()]
        while self._accept("&&"):
            operands.append(self._not())
        return operands[0] if len(operands) == 1 else BoolOp("and", tuple(operands))

    def _not(self) -> Node:
        if self._accept("!"):
            return Not(self._not())
        left = self._operand()
        op = self._accept("==", "===", "!=", "!==")
        if op is None:
            return left
        return Compare("==" if op.startswith("=") else "!=", left, self._operand())

    def _operand(self) -> Node:
        token = self._peek()
        if token is None:
            self._fail("expression ends too early")
        self._position += 1
        kind, value = token
        if kind == "op" and value == "(":
            node = self._or()
            if not self._accept(")"):
                self._fail("missing ')'")
            return node
        if kind == "str":
            return Literal(value[1:-1])
        if kind == "num":
            return Literal(float(value) if "." in value else int(value))
        if kind == "name" and value in _CONSTANTS:
            return Literal(_CONSTANTS[value])
        root, _, rest = value.partition(".")
        if kind == "name" and root in (USER_ATTRIBUTES, SECURITY_CONTEXT) and rest:
            return Reference(root, tuple(rest.split(".")))
        self._fail(
            f"unexpected {value!r}; expected userAttributes.x, securityContext.x or a literal"
        )


def _evaluate(node: Node, scope: Scope) -> Any:
    if isinstance(node, Reference):
        return node.lookup(scope)
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Not):
        return not _evaluate(node.operand, scope)
    if isinstance(node, BoolOp):
        results = (bool(_evaluate(operand, scope)) for operand in node.operands)
        return any(results) if node.op == "or" else all(results)
    equal = _equal(_evaluate(node.left, scope), _evaluate(node.right, scope))
    return equal if node.op == "==" else not equal


def _equal(left: Any, right: Any) -> bool:
    numbers = (int, float)
    if isinstance(left, str) and isinstance(right, numbers) and not isinstance(right, bool):
        return left == _number_text(right)
    if isinstance(right, str) and isinstance(left, numbers) and not isinstance(left, bool):
        return right == _number_text(left)
    return bool(left == right)


def _number_text(value: int | float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
