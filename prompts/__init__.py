"""Prompt templates: one Jinja file per prompt under ``templates/``, each with a ``system`` and a
``user`` block, and this one loader. Editing a template changes its hash, which is part of the
cache key of every task that renders it.

A name is either built-in (``"qa_plan"``: ``templates/qa_plan.j2`` here) or package-qualified
(``"some_plugin:notes"``: ``templates/notes.j2`` inside the importable package ``some_plugin``), so a
plugin ships the prompts of its own stages and they are hashed like the built-in ones."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

import jinja2

from clonemem.ids import stable_hash


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str
    template_hash: str


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    from clonemem.schemas.question_types import spec as question_type

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(template_source),
        undefined=jinja2.StrictUndefined,  # a missing variable is a bug, not an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        # templates are package data: checking each file's mtime on every render was a fifth of an
        # evaluation's time (template_hash is cached on the same assumption)
        auto_reload=False,
    )
    # ``question_type(name)``: the type's spec (definition, rules). Tasks that render QA prompts list
    # clonemem.schemas.question_types among their cache modules, so editing a spec invalidates them.
    env.globals["question_type"] = question_type
    return env


_NAME = re.compile(r"(?:(?P<package>[A-Za-z_][\w.]*):)?(?P<stem>[A-Za-z_][\w-]*)")


def _template_file(name: str) -> Traversable:
    """Where template ``name`` lives: a built-in name, or ``package:stem`` (a plugin's own templates)."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"prompt template name {name!r}: expected 'stem' or 'package:stem'")
    package = match["package"] or "clonemem.prompts"
    try:
        importlib.import_module(package)
    except ImportError as exc:
        raise ValueError(
            f"prompt template {name!r}: package {package!r} cannot be imported ({exc})"
        ) from None
    path = resources.files(package) / "templates" / f"{match['stem']}.j2"
    if not path.is_file():
        raise jinja2.TemplateNotFound(
            name,
            f"prompt template {name!r}: no templates/{match['stem']}.j2 in package {package!r}",
        )
    return path


def template_source(name: str) -> str:
    return _template_file(name).read_text("utf-8")


@lru_cache(maxsize=None)
def template_hash(name: str) -> str:
    """Hash of a template's source (templates are self-contained: no includes or inheritance)."""
    return stable_hash(template_source(name))


def render(name: str, **variables: object) -> Prompt:
    template = _env().get_template(name)
    context = template.new_context(variables)
    blocks = {}
    for block in ("system", "user"):
        if block not in template.blocks:
            raise KeyError(f"prompt template {name!r} has no {{% block {block} %}}")
        blocks[block] = "".join(template.blocks[block](context)).strip()
    return Prompt(
        name=name, system=blocks["system"], user=blocks["user"], template_hash=template_hash(name)
    )


def available() -> list[str]:
    folder = resources.files("clonemem.prompts") / "templates"
    return sorted(e.name.removesuffix(".j2") for e in folder.iterdir() if e.name.endswith(".j2"))
