"""The transactional parts of a pipeline file a store holds: a view store's `view` and
`compare` (the source's `tables`, `seed` and transactions are checked by their models in
spec_model; the rule that with `[[source.transactions]]` every store is a view, in
spec_sections)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from driftlab.scenarios.pipeline.spec_fields import (
    Fix,
    Text,
    refuse,
    template_names,
    templated,
)

DOTTED = r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$"
DottedPath = Annotated[
    Text, Field(pattern=DOTTED), Fix('write a dotted path of field names: "after.value"')
]
"""`after.value`: the `value` of the object `after`, each part a name."""


ViewQuery = Annotated[Text, templated("key")]
"""A view store's `view`: a query of the source with `{key}`."""

Compare = Annotated[
    tuple[DottedPath, ...],
    Field(min_length=1),
    Fix('write a list of dotted field paths: compare = ["status", "lines"]'),
]
"""A view store's `compare`: the dotted fields of its view's JSON compared."""


def check_view(kind: str, view: str | None, given: set[str]) -> None:
    """`view` and `compare` (`given` among a store's fields) on a view store only,
    which needs its view and the view its `{key}` (raised within validation)."""
    if kind != "view":
        for key in ("view", "compare"):
            if key in given:
                raise refuse(
                    f"belongs to a view store, this one is a {kind}",
                    'write kind = "view", or remove it',
                    at=key,
                )
    elif view is None:
        raise refuse(
            "is missing",
            'write view = "SELECT row_to_json(t) FROM {source.schema}.orders t WHERE id = {key}"',
            at="view",
        )
    elif "key" not in template_names(view):
        raise refuse(
            "does not use {key}", "select the one row of the store's key: ... = {key}", at="view"
        )
