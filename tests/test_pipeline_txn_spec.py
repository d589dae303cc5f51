"""The transactional pipeline file: tables, transactions, seed and view stores, and one
line naming the field and the fix for what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftlab.scenarios.pipeline.spec import PipelineError, load

ORDERS = """
services = ["postgres", "redis"]
[source]
seed = { rows = 20 }
[source.tables]
orders = "id text PRIMARY KEY, customer text NOT NULL, status text NOT NULL"
lines = "order_id text NOT NULL, line int NOT NULL, amount numeric(10,2) NOT NULL"
[[source.transactions]]
name = "new_order"
weight = 3
statements = [
  "INSERT INTO {source.schema}.orders VALUES ({key}, {customer}, 'new') ON CONFLICT DO NOTHING",
  "INSERT INTO {source.schema}.lines SELECT {key}, g, {amount} FROM generate_series(1, {lines}) g",
]
[[source.transactions]]
name = "drop_order"
statements = ["DELETE FROM {source.schema}.lines WHERE order_id = {key}",
              "DELETE FROM {source.schema}.orders WHERE id = {key}"]
[processes.docs]
command = ["python3", "docs.py"]
[stores.docs]
kind = "view"
redis = { pattern = "{namespace}:order:*" }
view = "SELECT row_to_json(o) FROM {source.schema}.orders o WHERE o.id = {key}"
compare = ["status", "customer"]
"""


def refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PipelineError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_the_orders_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "orders.toml"
    path.write_text(ORDERS)
    p = load(path)
    src = p.source
    assert src.transactional and set(src.tables) == {"orders", "lines"}
    assert [(t.name, t.weight, len(t.statements)) for t in src.transactions] == [
        ("new_order", 3.0, 2),
        ("drop_order", 1.0, 2),
    ]
    assert src.seed is not None and (src.seed.rows, src.seed.sql) == (20, None)
    (store,) = p.stores
    assert store.kind == "view" and store.compare == ("status", "customer")
    assert store.view is not None and "{key}" in store.view


def test_a_seed_script_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "seed.sql").write_text("INSERT INTO {source.schema}.orders VALUES ('k1', 'c', 'x')")
    text = ORDERS.replace(
        "seed = { rows = 20 }",
        'seed = { sql = "seed.sql", keys = "SELECT id FROM {source.schema}.orders" }',
    )
    path = tmp_path / "p.toml"
    path.write_text(text)
    seed = load(path).source.seed
    assert seed is not None and (seed.rows, seed.sql) == (None, "seed.sql")
    assert seed.keys == "SELECT id FROM {source.schema}.orders"


@pytest.mark.parametrize(
    ("old", "new", "field", "fix"),
    [
        ("weight = 3", "weight = 0", "source.transactions[0].weight", "a number > 0"),
        (
            'name = "drop_order"',
            'name = "new_order"',
            "source.transactions[1].name",
            "its own name",
        ),
        (
            'statements = ["DELETE',
            'statements = ["DELETE {nope} ',
            "source.transactions[1].statements[0]",
            "{nope} is not known",
        ),
        ("seed = { rows = 20 }", "seed = { rows = -1 }", "source.seed.rows", ">= 0"),
        (
            "seed = { rows = 20 }",
            'seed = { rows = 2, sql = "s.sql" }',
            "source.seed",
            "one of rows and sql",
        ),
        (
            "seed = { rows = 20 }",
            'seed = { sql = "none.sql" }',
            "source.seed.sql",
            "relative to the pipeline file",
        ),
        (
            "seed = { rows = 20 }",
            'seed = { rows = 2, keys = "SELECT 1" }',
            "source.seed.keys",
            "sql only",
        ),
        (
            "[source.tables]",
            'write = "x"\n[source.tables]',
            "source.write",
            "the transactions write the source",
        ),
        ('orders = "id', 'bad-name = "id', "source.tables.bad-name", "letters, digits and _"),
        ('kind = "view"', 'kind = "mirror"', "stores.docs.view", 'write kind = "view"'),
        (
            "[stores.docs]",
            '[stores.copy]\nredis = { pattern = "{namespace}:*" }\n[stores.docs]',
            "stores.copy.kind",
            'write kind = "view"',
        ),
        ("o.id = {key}", "o.id = 'k1'", "stores.docs.view", "does not use {key}"),
        (
            'compare = ["status", "customer"]',
            'compare = "status"',
            "stores.docs.compare",
            "dotted field paths",
        ),
        (
            "[source]",
            "[workload]\nmix = { write = 1, delete = 1 }\n[source]",
            "workload.mix",
            "the transactions' weights",
        ),
        ('view = "SELECT', 'kind2 = 1\nview = "SELECT', "stores.docs.kind2", "use one of"),
    ],
)
def test_a_bad_field_is_named_with_its_fix(
    tmp_path: Path, old: str, new: str, field: str, fix: str
) -> None:
    assert old in ORDERS
    message = refused(tmp_path, ORDERS.replace(old, new, 1))
    assert message.startswith(f"{field}:") and fix in message, message


def test_tables_and_views_need_transactions(tmp_path: Path) -> None:
    start, rest = ORDERS.split("[[source.transactions]]", 1)
    no_txn = start + "[processes.docs]" + rest.split("[processes.docs]", 1)[1]
    assert refused(tmp_path, no_txn).startswith("source.tables: needs [[source.transactions]]")
    no_tables = no_txn.replace("[source.tables]", "[other]").replace("seed = { rows = 20 }", "")
    message = refused(tmp_path, no_tables)
    assert message.startswith("other:") or message.startswith("stores.docs.kind"), message
