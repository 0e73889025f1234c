"""Text quality of the offline world (issue: offline text worth reading). Prints JSON.

Generates stages I–III of the demo benchmark in English (`configs/demo.toml`) and in Chinese
(`configs/demo-zh.toml`) on the offline provider, and reports per language and medium:

- `repeat_share`: the share of traces that repeat a sequence within themselves — 8 words in
  English, 12 characters in Chinese (templates pasted twice read as machine text);
- `distinct_2`: distinct bigrams over all bigrams across the traces (word bigrams in English,
  character bigrams in Chinese) — how varied the wording is from one trace to the next;
- `mean_length`: words (en) or characters (zh) per trace.

    python benchmarks/text_quality.py [--config FILE ...] [--personas N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [ROOT / "configs" / "demo.toml", ROOT / "configs" / "demo-zh.toml"]
WORDS_EN = 8
CHARS_ZH = 12
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def tokens(text: str, language: str) -> list[str]:
    """Words (en, lower-cased, punctuation dropped) or characters (zh: Chinese characters and the
    words of any Latin text between them)."""
    if language == "zh":
        return [t for t in re.findall(r"[\u4e00-\u9fff]|[A-Za-z0-9]+", text)]
    return _WORD.findall(text.lower())


def repeats(text: str, language: str) -> bool:
    """True when some window of n tokens occurs twice in the text, lines processed as one sequence."""
    n = CHARS_ZH if language == "zh" else WORDS_EN
    toks = tokens(text, language)
    seen: set[tuple[str, ...]] = set()
    for i in range(len(toks) - n + 1):
        gram = tuple(toks[i : i + n])
        if gram in seen:
            return True
        seen.add(gram)
    return False


def distinct_2(texts: Iterable[str], language: str) -> float:
    grams: list[tuple[str, str]] = []
    for text in texts:
        toks = tokens(text, language)
        grams.extend(zip(toks, toks[1:]))
    return round(len(set(grams)) / len(grams), 4) if grams else 0.0


def stats(texts: Sequence[str], language: str) -> dict:
    rep = sum(repeats(t, language) for t in texts)
    return {
        "traces": len(texts),
        "repeating": rep,
        "repeat_share": round(rep / max(1, len(texts)), 4),
        "distinct_2": distinct_2(texts, language),
        "mean_length": round(sum(len(tokens(t, language)) for t in texts) / max(1, len(texts)), 1),
    }


def report(traces: Sequence[tuple[str, str]], language: str, examples: int = 0) -> dict:
    """`traces` as (medium, content) pairs of one language."""
    by_medium: dict[str, list[str]] = defaultdict(list)
    for medium, content in traces:
        by_medium[medium].append(content)
    out = {
        "all": stats([c for _, c in traces], language),
        "media": {m: stats(texts, language) for m, texts in sorted(by_medium.items())},
    }
    if examples:
        out["repeating_examples"] = [c for _, c in traces if repeats(c, language)][:examples]
    return out


def generate(config_path: Path, personas: int | None) -> tuple[str, list[tuple[str, str]]]:
    """Stages I–III of a config on the offline provider, in process (no warehouse, no Prefect)."""
    from clonemem.generation.assemble import assemble
    from clonemem.generation.execute import new_dags, run_inline
    from clonemem.runtime import Runtime, use
    from clonemem.schemas.config import load_config

    cfg = load_config(config_path)
    if personas:
        cfg = cfg.model_copy(
            update={"generation": cfg.generation.model_copy(update={"personas": personas})}
        )
    rt, done = Runtime(cfg), []
    with use(rt):
        run_inline(new_dags(cfg), rt, done.append)
    rows = []
    for dag in sorted(done, key=lambda d: d.spec.index):
        assembly = assemble(dag, cfg.name)
        if assembly is None:
            raise SystemExit(f"{config_path}: persona {dag.spec.index} failed in stage I")
        rows += [
            (r["medium"], r["content"])
            for r in sorted(assembly.rows.tables["traces"], key=lambda r: r["trace_id"])
        ]
    return cfg.generation.language, rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", type=Path, action="append", help="run config(s); default: the en and zh demos"
    )
    parser.add_argument(
        "--personas", type=int, default=None, help="override the configs' persona count"
    )
    parser.add_argument(
        "--examples", type=int, default=3, help="repeating traces to print per language"
    )
    args = parser.parse_args(argv)
    out: dict = {
        "benchmark": "text_quality",
        "window": {"en": f"{WORDS_EN} words", "zh": f"{CHARS_ZH} characters"},
        "languages": {},
    }
    t0 = time.perf_counter()
    for path in args.config or CONFIGS:
        language, traces = generate(path, args.personas)
        out["languages"][language] = {
            "config": path.name,
            **report(traces, language, args.examples),
        }
    out["target_repeat_share"] = 0.01
    out["meets_target"] = all(v["all"]["repeat_share"] < 0.01 for v in out["languages"].values())
    out["seconds"] = round(time.perf_counter() - t0, 1)
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
