"""The derived search index: an embedded tantivy index, one per run namespace.

tantivy (a Rust search library with Python bindings on PyPI) is real search software with
the property the experiments need: a write becomes visible to readers only after the
index writer commits and the reader reloads, exactly like the refresh interval of
Elasticsearch or Solr. It runs in-process, so it needs no JVM or server on a two-core
machine, and its on-disk index sits in the run directory for inspection.

Documents are `(key, value, version)`; a key holds at most one document. Updates are a
delete of the key's term followed by an add, applied in call order, so the index's final
state reflects the order in which the application reached it (which is what the
dual-write race is about).
"""

from __future__ import annotations

import threading
from pathlib import Path

import tantivy


class SearchIndex:
    """A key-value view over a tantivy index, safe to share between threads.

    `write`/`delete` stage a change in the index writer; `commit` makes the staged
    changes visible to `get`. The caller decides when to commit: after every write (a
    synchronous view) or on a timer (an asynchronous view, see `dual_write`).
    """

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        # The raw tokenizer keeps a key as one exact term, so delete-by-term hits it.
        builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("value", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_integer_field("version", stored=True)
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema, path=str(path), reuse=False)
        self._writer = self._index.writer(heap_size=15_000_000, num_threads=1)
        self._lock = threading.Lock()
        self.path = path

    def write(self, key: str, value: str, version: int | None) -> None:
        """Stage `key = value` (replacing any document of the key)."""
        doc = tantivy.Document(key=key, value=value, version=version if version else 0)
        with self._lock:
            self._writer.delete_documents_by_term("key", key)
            self._writer.add_document(doc)

    def delete(self, key: str) -> None:
        """Stage the removal of `key`."""
        with self._lock:
            self._writer.delete_documents_by_term("key", key)

    def commit(self) -> None:
        """Make every staged change visible to readers."""
        with self._lock:
            self._writer.commit()
        self._index.reload()

    def get(self, key: str) -> tuple[str, int | None] | None:
        """The visible `(value, version)` of `key`, or None if the key has no document."""
        searcher = self._index.searcher()
        query = tantivy.Query.term_query(self._schema, "key", key)
        hits = searcher.search(query, limit=1).hits
        if not hits:
            return None
        doc = searcher.doc(hits[0][1])
        version = doc.get_first("version")
        return doc.get_first("value"), (int(version) or None) if version is not None else None

    def items(self) -> dict[str, tuple[str, int | None]]:
        """Every visible document as `key -> (value, version)`."""
        searcher = self._index.searcher()
        n = searcher.num_docs
        if n == 0:
            return {}
        out: dict[str, tuple[str, int | None]] = {}
        for _score, address in searcher.search(tantivy.Query.all_query(), limit=n).hits:
            doc = searcher.doc(address)
            version = doc.get_first("version")
            out[doc.get_first("key")] = (doc.get_first("value"), int(version) or None)
        return out

    def close(self) -> None:
        """Commit what is staged and release the writer's lock on the directory."""
        with self._lock:
            self._writer.commit()
            self._writer.wait_merging_threads()
