"""A first run that shows its progress (issue 30, item 9): `clonemem demo` held its progress at `1/30` for
about 12 minutes on a loaded machine. Whatever runs under the CLI's progress display now says, whenever
nothing was shown for ``QUIET_S`` seconds (at most 10 s apart), what is under way: the stage, what it
works on (a persona, a memory system) and how far it got (LLM steps done of those known, questions,
traces), on a terminal (above the bars) and in plain lines."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path

import pytest

from clonemem import progress
from tests.pipeline_kit import tiny_config

LINE = re.compile(r"^  (generation|stage IV|evaluation)\b.*\b\d+/\d+\b")


class Timed(io.StringIO):
    """A non-terminal stream that notes when each line was written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            for line in text.splitlines():
                if line.strip():
                    self.lines.append((time.monotonic(), line))
        return len(text)

    def isatty(self) -> bool:
        return False


class Said:
    """A display that keeps what it is told (the ticker's view of bars or plain lines)."""

    def __init__(self) -> None:
        self.shown_at = time.monotonic()
        self.lines: list[str] = []

    def update(self, task: str, done: int, total: int) -> None:
        self.shown_at = time.monotonic()

    def say(self, line: str) -> None:
        self.lines.append(line)
        self.shown_at = time.monotonic()


def test_quiet_progress_is_filled_with_what_is_under_way() -> None:
    said = Said()
    with progress.listening(said), progress.ticking(said, quiet_s=0.4):
        with (
            progress.staged("evaluation"),
            progress.doing("mem0 for persona p1", "building", 400, "traces") as act,
        ):
            act.update(120)
            progress.advance("evaluation: build and retrieve (system × persona)", 1, 30)
            time.sleep(1.3)
            act.finish()
            said.lines.clear()
            time.sleep(1.0)
    assert said.lines and all(
        line == "evaluation: build and retrieve (system × persona): 1/30 done"
        for line in said.lines
    ), said.lines


def test_an_activity_line_names_its_stage_and_counts() -> None:
    with progress.staged("generation"):
        act = progress.Activity("persona p01", "generating", 0, "LLM steps")
    act.grow(3)
    act.advance()
    assert act.line().startswith("generation: generating persona p01: 1/3 LLM steps, running ")


# A line is due once ``quiet_s`` passed without one, and the ticker looks at least every second: lines
# come about ``quiet_s`` + 1 s apart at most; the bound stated for the CLI (10 s) is twice its quiet time
# (``progress.QUIET_S``, 5 s), room for a loaded machine. The run below has a quiet time of 1.5 s (the
# ticker then looks every 0.75 s) and the same proportion, so that a run several bounds long takes
# seconds, not half a minute.
QUIET = 1.5


@pytest.mark.prefect
@pytest.mark.timeout(600)
def test_a_small_generation_shows_a_line_at_least_every_twice_the_quiet_time_naming_its_stage(
    tmp_path: Path,
) -> None:
    """Generation under ``progress.shown`` with a quiet time of 1.5 s: lines at most 2 x 1.5 s apart
    (10 s with the CLI's 5 s), each naming the stage and its counts."""
    from clonemem.flows.generation import generate_flow

    assert 2 * progress.QUIET_S <= 10  # the CLI's own bound, in the same proportion
    bound = 2 * QUIET
    # one persona of about 50 LLM steps at 0.15 s each, one at a time: over 6 s of generation
    cfg = tiny_config(tmp_path, latency_ms=150)
    # a seed no other test uses: served from the step cache another test filled, nothing would be under way
    text = cfg.read_text("utf-8").replace("\nseed = 7\n", "\nseed = 7031\n", 1)
    cfg.write_text(text.replace("[qa]", "workers = 1\n[qa]", 1), "utf-8")
    out = Timed()
    started = time.monotonic()
    with progress.shown(out, quiet_s=QUIET):
        result = generate_flow(str(tmp_path / "wh.duckdb"), str(cfg))
    ended = time.monotonic()
    assert result.generated == 1
    times = [started] + [t for t, _ in out.lines] + [ended]
    gaps = [b - a for a, b in zip(times, times[1:])]
    text = "\n".join(line for _, line in out.lines)
    print(text)
    assert max(gaps) <= bound, (max(gaps), text)
    staged = [line for _, line in out.lines if not line.startswith("  starting: ")]
    assert staged and all(LINE.match(line) for line in staged), text
    assert any("generating persona p01: " in line and "LLM steps" in line for line in staged), text
    assert ended - started > 2 * bound  # the run was long enough for the check to mean something
