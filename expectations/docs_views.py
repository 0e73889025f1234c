"""The gate's Data Docs views: GX's own page views, with the templates compiled once per process.

GX makes a new Jinja environment for every view it builds, and a view's environment compiles each template
it renders anew: about fifty templates per gate, 0.45 s of a warm gate's 3.8 s here. These views are GX's
(named in the site's configuration, GX's documented way to choose a site's views) with one change: their
environments share a Jinja bytecode cache, held in memory, so a template is compiled once per process. A
cached template is used only while its source is unchanged (Jinja checks the source's checksum).
"""

from __future__ import annotations

import threading
from typing import Any

import jinja2
from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView

from clonemem.expectations.gx_duckdb import GX_VERSION
from clonemem.thirdparty import written_for

# GX's views keep their Jinja environment in `env`, made in `__init__` (the GX the gate's other patch is
# pinned to): checked when a view is made
_WHAT = "clonemem.expectations.docs_views (the Data Docs views' Jinja environment)"


class _InMemory(jinja2.BytecodeCache):
    """Compiled templates by Jinja's key (the template's name) with the checksum of their source."""

    def __init__(self) -> None:
        self._code: dict[str, tuple[str, Any]] = {}
        self._lock = threading.Lock()
        self.compiled = 0  # templates compiled in this process (Jinja dumps each one it compiles)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with self._lock:
            found = self._code.get(bucket.key)
        if found is not None and found[0] == bucket.checksum:
            bucket.code = found[1]

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with self._lock:
            self._code[bucket.key] = (bucket.checksum, bucket.code)
            self.compiled += 1


COMPILED = _InMemory()


def _share(env: jinja2.Environment) -> None:
    written_for("great-expectations", GX_VERSION, _WHAT)
    env.bytecode_cache = COMPILED


class PageView(DefaultJinjaPageView):
    """GX's page view (suites and validation results)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _share(self.env)


class IndexPageView(DefaultJinjaIndexPageView):
    """GX's index page view."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _share(self.env)


def site_views() -> dict[str, Any]:
    """The parts of a ``SiteBuilder`` configuration that name these views (GX merges them into its
    defaults: every section keeps its own renderer and store)."""
    module = __name__
    page = {"module_name": module, "class_name": PageView.__name__}
    return {
        "site_index_builder": {
            "class_name": "DefaultSiteIndexBuilder",
            "view": {"module_name": module, "class_name": IndexPageView.__name__},
        },
        "site_section_builders": {
            section: {"view": page} for section in ("expectations", "validations", "profiling")
        },
    }
