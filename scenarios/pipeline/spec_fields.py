"""Reading a pipeline file's fields: the one-line error naming the field and the fix,
the pydantic base of its sections with the translation of pydantic's errors into that
line, and the check of `{...}` templates against what the file declares.

pydantic checks the types, refuses unknown keys and fills defaults; what it cannot say
in a pipeline file's terms, each field's fix, comes from its `Fix` and from validators
that raise `refuse(problem, fix)`: each refuses where it stands, so a value's own errors
take its fix and the errors below it keep theirs."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Annotated, Any, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ModelWrapValidatorHandler,
    PrivateAttr,
    Strict,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic_core import CoreSchema, ErrorDetails, PydanticCustomError, core_schema

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
    """What a refusal of the value it annotates tells the user to write (a bounded
    value's fix names its bound). pydantic runs it around the value's validation: the
    first error there, the value's or one below it, takes this fix, unless a validator
    or a Fix below has refused it already or it is a string's (told to use quotes)."""

    text: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_wrap_validator_function(self._validate, handler(source))

    def _validate(self, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            error = exc.errors()[0]
            if error["type"] in ("spec", "string_type"):
                raise
            raise refuse(_problem(error), self.text, at=_below("", *error["loc"])) from None


# Scalars are taken as written: TOML types its values, and `"30"` for a number or `1`
# for a string is a mistake to name, not a value to convert.
Text = Annotated[str, Strict()]
Number = Annotated[float, Strict(), Field(ge=0), Fix("write a number >= 0")]
Name = Annotated[str, Strict(), Field(pattern=NAME), Fix("use letters, digits, - and _")]


class Section(BaseModel):
    """A table of the pipeline file: an unknown key is refused (a typo would be ignored
    otherwise); the models are frozen, like the objects built from them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="wrap")
    @classmethod
    def _own_refusal(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """An unknown key (first: a misspelt one leaves its field missing too) or a
        missing field refused with the field's Fix: the table's own errors."""
        try:
            return handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
            if first["type"] not in ("extra_forbidden", "missing"):
                raise
            key = str(first["loc"][0])
            if first["type"] == "extra_forbidden":
                known = ", ".join(f.alias or n for n, f in cls.model_fields.items())
                raise refuse("is not a known field", f"use one of: {known}", at=key) from None
            fixes = [m.text for m in cls.model_fields[key].metadata if isinstance(m, Fix)]
            raise refuse("is missing", (fixes or [f"give {key}"])[-1], at=key) from None


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
    """`data` as `model`, or PipelineError naming the first refused field below `where`;
    `context` is what the validators check templates and names against."""
    try:
        return model.model_validate(data, context=context, by_name=False)
    except ValidationError as exc:
        raise _refusal(exc.errors()[0], where) from None


def _below(where: str, *loc: int | str) -> str:
    """The path of `loc` below `where`: an index in brackets, a key after a dot."""
    for p in loc:
        if isinstance(p, int):
            where += f"[{p}]"
        elif p and p != "[key]":  # a dict key's own error is the key's
            where += p if p.startswith("[") else f".{p}"
    return where.lstrip(".")


def _problem(error: ErrorDetails) -> str:
    """What the refused value is."""
    if error["type"] in ("model_type", "dict_type"):
        return "is not a table"
    return f"is {error['input']!r}"


_PLAIN_FIXES = {"string_type": "write a string in quotes", "tuple_type": "write a list"}
"""The fix of a type error on a field that declares none (else: give the field)."""


def _refusal(error: ErrorDetails, where: str) -> PipelineError:
    """pydantic's `error` as the one line: the field's path below `where`, what it is
    and the fix (a refusal's own, else a table's or its type's)."""
    loc, ctx = error["loc"], error.get("ctx", {})
    if error["type"] == "spec":
        return spec_error(_below(where, *loc, ctx["at"]), ctx["problem"], ctx["fix"])
    path, last = _below(where, *loc), loc[-1] if loc else where
    if error["type"] in ("model_type", "dict_type"):
        # A section ([source], [processes.x]) is a table of its own, a field's inline.
        section = not loc or (not where and len(loc) == 1)
        fix = f"write a [{path}] table" if section else f"write {last} = {{ ... }}"
    else:
        fix = _PLAIN_FIXES.get(error["type"], f"give {last}")
    return spec_error(path, _problem(error), fix)


def template_names(text: str) -> list[str]:
    """The placeholders of `text` (`{postgres.dsn}` -> "postgres.dsn")."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise refuse(f"{text!r} is not a valid template ({exc})", "write {{ for a brace") from None


PORTS = "{ports}"
"""In `templated`'s names: the processes' `{<process>.port}` and `{<process>.url}`."""


def placeholders_known(text: str, info: ValidationInfo, extra: tuple[str, ...]) -> str:
    """`text`, each placeholder refused unless the run can fill it: the validation
    context's services and `extra` names (PORTS among them: the context's ports)."""
    ctx = info.context or {}
    allowed = {*RUN_FIELDS, *(f"source.{f}" for f in SOURCE_FIELDS)}
    allowed |= {n for e in extra for n in (ctx["ports"] if e == PORTS else (e,))}
    allowed |= {f"{svc}.{f}" for svc in ctx["services"] for f in SERVICE_FIELDS[svc]}
    for name in template_names(text):
        if name not in allowed:
            svc = name.split(".")[0]
            if svc in SERVICE_FIELDS and svc not in ctx["services"]:
                fix = f'add "{svc}" to services'
            else:
                fix = f"use one of: {', '.join(sorted(allowed))}"
            raise refuse(f"{{{name}}} is not known", fix)
    return text


def templated(*extra: str) -> AfterValidator:
    """A template field's check (placeholders_known)."""

    def check(text: str, info: ValidationInfo) -> str:
        return placeholders_known(text, info, extra)

    return AfterValidator(check)
