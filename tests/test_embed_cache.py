"""Embeddings kept on disk between processes (``CLONEMEM_EMBED_CACHE``): a later process embeds only
texts never seen, gets the very same vectors, and a cache that cannot be used never stops embedding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clonemem.memory import embed

TEXTS = ["I went hiking last week.", "上周我去爬山了。", "Dinner with Mel on Friday"]


@pytest.fixture
def disk(monkeypatch, tmp_path: Path):
    path = tmp_path / "cache" / "embeddings.sqlite3"
    monkeypatch.setenv(embed.CACHE_ENV, str(path))
    monkeypatch.setattr(embed, "_disk", embed._DiskVectors())
    embed.clear_cache()
    yield path
    embed.clear_cache()


def test_a_later_process_reads_the_vectors_an_earlier_one_embedded(
    disk: Path, tmp_path: Path, monkeypatch
) -> None:
    saved = tmp_path / "first.npy"
    code = (
        "import numpy as np, sys; from clonemem.memory import embed; "
        f"np.save(sys.argv[1], embed.encode({TEXTS!r}, role='passage'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(saved)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert disk.is_file()

    def no_model(texts, role):
        raise AssertionError(f"embedded {texts!r} again")

    monkeypatch.setattr(embed, "_embed", no_model)
    again = embed.encode(TEXTS, role="passage")
    assert np.array_equal(again, np.load(saved))  # the very same vectors, and no model call
    with pytest.raises(AssertionError, match="embedded"):
        embed.encode(TEXTS, role="query")  # the role is part of the key: e5's prefixes differ


def test_only_new_texts_are_embedded(disk: Path, monkeypatch) -> None:
    embed.encode(TEXTS[:2])
    embed.clear_cache()
    seen: list[str] = []
    real = embed._embed

    def counting(texts, role):
        seen.extend(texts)
        return real(texts, role)

    monkeypatch.setattr(embed, "_embed", counting)
    out = embed.encode(TEXTS)
    assert seen == [TEXTS[2]]
    assert out.shape == (3, embed.DIM)


def test_an_unusable_cache_is_switched_off_and_embedding_goes_on(
    monkeypatch, tmp_path: Path, caplog
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", "utf-8")
    monkeypatch.setenv(
        embed.CACHE_ENV, str(blocker / "embeddings.sqlite3")
    )  # its folder cannot be made
    monkeypatch.setattr(embed, "_disk", embed._DiskVectors())
    embed.clear_cache()
    with caplog.at_level("INFO", logger=embed.__name__):
        out = embed.encode(TEXTS)
        embed.encode(["one more"])
    assert out.shape == (3, embed.DIM)
    said = [r.getMessage() for r in caplog.records if r.name == embed.__name__]
    assert len(said) == 1 and "switched off" in said[0]  # said once, then silent


def test_off_writes_nothing(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(embed.CACHE_ENV, "off")
    monkeypatch.setattr(embed, "_disk", embed._DiskVectors())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    embed.clear_cache()
    embed.encode(TEXTS)
    assert embed._DiskVectors.path() is None
    assert not any(tmp_path.rglob("*.sqlite3"))
