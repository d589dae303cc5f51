"""The transactional parts of a pipeline file a store holds: a view store's `view` and
`compare`, and the rule that with `[[source.transactions]]` every store is a view (the
source's `tables`, `seed` and transactions are checked by their models in spec_model)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from harness.pipeline.spec_fields import (
    Fix,
    Section,
    Text,
    refuse,
    spec_error,
    template_names,
    templated,
)
from harness.pipeline.spec_model import StoreSpec

DOTTED = r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)*$"
DottedPath = Annotated[
    Text, Field(pattern=DOTTED), Fix('write a dotted path of field names: "after.value"')
]
"""`after.value`: the `value` of the object `after`, each part a name."""


def _uses_key(view: str) -> str:
    if "key" not in template_names(view):
        raise refuse("does not use {key}", "select the one row of the store's key: ... = {key}")
    return view


class ViewFields(Section):
    """A store's `view` (a query with `{key}`) and `compare` (dotted paths)."""

    view: Annotated[Text, templated("key"), AfterValidator(_uses_key)] | None = None
    compare: (
        Annotated[
            tuple[DottedPath, ...],
            Field(min_length=1),
            Fix('write a list of dotted field paths: compare = ["status", "lines"]'),
        ]
        | None
    ) = None

    def check_view(self, kind: str) -> None:
        """`view` and `compare` on a view store only, which needs its view (raised within
        validation)."""
        if kind != "view":
            for key in ("view", "compare"):
                if key in self.model_fields_set:
                    raise refuse(
                        f"belongs to a view store, this one is a {kind}",
                        'write kind = "view", or remove it',
                        at=key,
                    )
        elif self.view is None:
            raise refuse(
                "is missing",
                'write view = "SELECT row_to_json(t) FROM {source.schema}.orders t'
                ' WHERE id = {key}"',
                at="view",
            )


def check_views(stores: tuple[StoreSpec, ...], transactional: bool) -> None:
    """With transactions every store is a view; without, none is."""
    for s in stores:
        if transactional and s.kind != "view":
            raise spec_error(
                f"stores.{s.name}.kind",
                f"is {s.kind!r}, and the source runs transactions",
                'write kind = "view" and its view (a mirror of a row: '
                '"SELECT row_to_json(t) FROM {source.schema}.orders t WHERE id = {key}")',
            )
        if not transactional and s.kind == "view":
            raise spec_error(
                f"stores.{s.name}.kind",
                "is view, and the source has no [[source.transactions]]",
                "add the transactions that write the source, or use mirror or log",
            )
