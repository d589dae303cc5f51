"""Reading a pipeline file's fields: the one-line error naming the field and the fix,
the pydantic base of its sections with the translation of pydantic's errors into that
line, and the check of `{...}` templates against what the file declares.

pydantic checks the types, refuses unknown keys and fills defaults; what it cannot say
in a pipeline file's terms, each field's fix, comes from its `Fix` and from validators
that raise `refuse(problem, fix)`."""

from __future__ import annotations

import re
import string
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import ErrorDetails, PydanticCustomError

NAME = r"^[A-Za-z][A-Za-z0-9_-]*$"
NAME_PATTERN = re.compile(NAME)


class PipelineError(ValueError):
    """A pipeline file that cannot be used: the message names the field and the fix."""


SERVICE_FIELDS: dict[str, tuple[str, ...]] = {
    "postgres": ("dsn", "jdbc_url", "host", "port", "user", "password", "dbname"),
    "redis": ("url", "host", "port", "password"),
    "kafka": (
        "bootstrap",
        "security_protocol",
        "sasl_mechanism",
        "username",
        "password",
        "client_properties",
    ),
    "connect": ("url", "host", "port"),
    "rabbitmq": ("url", "host", "port", "user", "password"),
    "nats": ("url", "host", "port"),
}
"""What a template may ask of each service's link: `{postgres.dsn}`, `{redis.url}`, ..."""

RUN_FIELDS = ("namespace", "run_dir", "pipeline_dir", "python")
"""Plain template names: the run's namespace (unique: a schema, a key prefix, a slot
name), the run folder, the pipeline file's folder, the Python driftlab runs on (with
psycopg and redis-py). Each process adds `{<process>.port}`, a free port drawn per run,
and `{<process>.url}`, `http://127.0.0.1:<that port>`."""

SOURCE_FIELDS = ("table", "schema")
"""`{source.table}` (schema-qualified) and `{source.schema}` (the namespace)."""


@dataclass(frozen=True)
class Fix:
    """What a refusal of the field it annotates tells the user to write."""

    text: str


# Scalars are taken as written: TOML types its values, and `"30"` for a number or `1`
# for a string is a mistake to name, not a value to convert.
Text = Annotated[str, Strict()]
Number = Annotated[float, Strict(), Field(ge=0), Fix("write a number >= 0")]
Name = Annotated[str, Strict(), Field(pattern=NAME), Fix("use letters, digits, - and _")]


class Section(BaseModel):
    """A table of the pipeline file: an unknown key is refused (a typo would be ignored
    otherwise); the models are frozen, like the objects built from them."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Named(Section):
    """A table the file names by its key (`[stores.<name>]`): the name is the key given
    to `validated` as `name`, not a field the table could hold."""

    _name: str = PrivateAttr("")

    def model_post_init(self, context: Any, /) -> None:
        self._name = context["name"]

    @property
    def name(self) -> str:
        """The table's key in the file."""
        return self._name


S = TypeVar("S", bound=BaseModel)


def spec_error(where: str, problem: str, fix: str) -> PipelineError:
    """The one-line error for field `where`: its problem and the fix."""
    return PipelineError(f"{where}: {problem}; {fix}")


def refuse(problem: str, fix: str, at: str = "") -> PydanticCustomError:
    """spec_error for a validator: pydantic knows the field's place; `at` goes below it."""
    return PydanticCustomError(
        "spec", "{problem}; {fix}", {"problem": problem, "fix": fix, "at": at}
    )


def validated(model: type[S], data: Any, where: str, **context: Any) -> S:
    """`data` as `model`, or PipelineError naming the first refused field below `where`
    (an unknown key first: a misspelt one leaves its field missing too); `context` is
    what the validators check templates and names against."""
    try:
        return model.model_validate(data, context=context, by_name=False)
    except ValidationError as exc:
        errors = exc.errors()
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise _refusal(model, first, where) from None


def _bare(tp: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(tp) in (Union, types.UnionType):
        return next(a for a in get_args(tp) if a is not type(None))
    return tp


def _fixes(tp: Any) -> list[str]:
    """The Fix texts of an `Annotated[..., Fix(...)]` type (or of `X | None`)."""
    tp = _bare(tp)
    return (
        [m.text for m in get_args(tp)[1:] if isinstance(m, Fix)]
        if get_origin(tp) is Annotated
        else []
    )


def _field(model: type[BaseModel], loc: Sequence[int | str]) -> tuple[type[BaseModel], list[str]]:
    """The model holding the value at `loc` and the fixes that value's declaration
    names: its own type's, else its field's (a list's item has its list's)."""
    owner, fixes, tp = model, [], model
    for part in loc:
        tp = _bare(tp)
        tp = get_args(tp)[0] if get_origin(tp) is Annotated else tp
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            owner = tp
            info = next((f for n, f in tp.model_fields.items() if part in (n, f.alias)), None)
            if info is None:
                return owner, []
            tp = info.annotation
            fixes = _fixes(tp) or [m.text for m in info.metadata if isinstance(m, Fix)]
        else:  # a list's index or a table's key: on to its items
            args = [a for a in get_args(tp) if a is not Ellipsis]
            tp = args[-1] if args else tp
            fixes = _fixes(tp) or fixes
    return owner, fixes


_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
"""A number's bounds, as its error's context names them."""

_PLAIN_FIXES = {
    "float_type": "write a number",
    "int_type": "write a whole number",
    "tuple_type": "write a list",
    "list_type": "write a list",
}
"""The fix of a type error on a field that declares none (else: give the field)."""


def _refusal(model: type[BaseModel], error: ErrorDetails, where: str) -> PipelineError:
    """pydantic's `error` as the one line: the field's path below `where`, what it is
    and the fix its declaration names (its Fix, the bound it broke, or its type's)."""
    loc = [p for p in error["loc"] if p != "[key]"]
    path = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    ctx, kind = error.get("ctx", {}), error["type"]
    if kind == "spec":
        below = "" if ctx["at"][:1] in ("", "[") else "."
        return spec_error(f"{path}{below}{ctx['at']}".lstrip("."), ctx["problem"], ctx["fix"])
    path, last = path.lstrip("."), loc[-1] if loc else where
    owner, fixes = _field(model, loc)
    if kind == "extra_forbidden":
        known = ", ".join(f.alias or n for n, f in owner.model_fields.items())
        return spec_error(path, "is not a known field", f"use one of: {known}")
    if kind in ("model_type", "dict_type"):
        # A section ([source], [processes.x]) is a table of its own, a field's inline.
        section = not loc or (not where and len(loc) == 1)
        table = f"write a [{path}] table" if section else f"write {last} = {{ ... }}"
        return spec_error(path, "is not a table", (fixes or [table])[-1])
    if kind == "string_type":  # whatever the string's form, first it is a string
        fixes = ["write a string in quotes"]
    bound = [f"write a number {op} {ctx[k]:g}" for k, op in _BOUNDS.items() if k in ctx]
    fix = (fixes or bound or [_PLAIN_FIXES.get(kind, f"give {last}")])[-1]
    return spec_error(path, "is missing" if kind == "missing" else f"is {error['input']!r}", fix)


def template_names(text: str) -> list[str]:
    """The placeholders of `text` (`{postgres.dsn}` -> "postgres.dsn")."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise refuse(f"{text!r} is not a valid template ({exc})", "write {{ for a brace") from None


def check_template(text: str, services: tuple[str, ...], extra: tuple[str, ...]) -> None:
    """Refuse a placeholder of `text` the run cannot fill (raised within validation)."""
    allowed = set(RUN_FIELDS) | set(extra) | {f"source.{f}" for f in SOURCE_FIELDS}
    for svc in services:
        allowed |= {f"{svc}.{f}" for f in SERVICE_FIELDS[svc]}
    for name in template_names(text):
        if name not in allowed:
            svc = name.split(".")[0]
            if svc in SERVICE_FIELDS and svc not in services:
                fix = f'add "{svc}" to services'
            else:
                fix = f"use one of: {', '.join(sorted(allowed))}"
            raise refuse(f"{{{name}}} is not known", fix)


PORTS = "{ports}"
"""In `templated`'s names: the processes' `{<process>.port}` and `{<process>.url}`."""


def placeholders_known(text: str, info: ValidationInfo, extra: tuple[str, ...]) -> str:
    """`text`, its placeholders checked against the validation context's services and
    `extra` names (PORTS among them: the context's ports)."""
    ctx = info.context or {}
    names = tuple(n for e in extra for n in (ctx["ports"] if e == PORTS else (e,)))
    check_template(text, ctx["services"], names)
    return text


def templated(*extra: str) -> AfterValidator:
    """A template field's check (placeholders_known)."""

    def check(text: str, info: ValidationInfo) -> str:
        return placeholders_known(text, info, extra)

    return AfterValidator(check)
