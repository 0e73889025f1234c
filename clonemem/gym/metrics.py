"""The gym's scores (after AMemGym): accuracy per evaluation position and overall with a 95% bootstrap
interval over answers, the random bound (the expected accuracy of a uniform guess: the mean of
1/#choices), the upper bound (the assistant handed the true states), the normalized memory score
(S - S_random) / (S_UB - S_random), the write/read/use diagnosis of misses, and the off-policy
comparison: the same memories on the reference transcript, ranked against their on-policy ranks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from clonemem.evaluation.metrics import bootstrap_ci
from clonemem.gym.interact import Answered, Interaction
from clonemem.schemas import gym as G

DIAGNOSES = ("write", "read", "use", "unknown")


def accuracy(answers: Sequence[Answered]) -> float:
    return sum(a.correct for a in answers) / len(answers) if answers else 0.0


def random_bound(answers: Sequence[Answered]) -> float:
    return sum(1 / a.options for a in answers) / len(answers) if answers else 0.0


def by_position(
    answers: Sequence[Answered],
    positions: int,
    measure: Callable[[Sequence[Answered]], float] = accuracy,
) -> list[float]:
    return [round(measure([a for a in answers if a.position == p]), 4) for p in range(positions)]


def memory_score(s: float, s_random: float, s_upper: float) -> float:
    """(S - S_random) / (S_UB - S_random); 0 when the upper bound does not beat random (nothing to normalize by)."""
    span = s_upper - s_random
    return round((s - s_random) / span, 4) if span > 1e-9 else 0.0


def ranks(scores: dict[str, float]) -> dict[str, int]:
    """1 for the best; equal scores share the better rank."""
    ordered = sorted(scores.values(), reverse=True)
    return {name: ordered.index(score) + 1 for name, score in scores.items()}


def score(
    systems: Sequence[str],
    on: Mapping[str, Sequence[Interaction]],
    off: Mapping[str, Sequence[Interaction]],
    upper: Sequence[Interaction],
    positions: int,
    samples: int,
    seed: int,
) -> tuple[list[G.SystemDetail], list[float], list[float], G.GymReport]:
    """Per-system details, the bounds per position, and the --json report (exposure rate filled by the caller)."""
    ub_answers = [a for i in upper for a in i.answers]
    s_random, s_upper = random_bound(ub_answers), accuracy(ub_answers)
    random_pos = by_position(ub_answers, positions, random_bound)
    upper_pos = by_position(ub_answers, positions)
    details = []
    for name in systems:
        answers = [a for i in on[name] for a in i.answers]
        off_answers = [a for i in off[name] for a in i.answers]
        acc = accuracy(answers)
        low, high = bootstrap_ci(np.array([float(a.correct) for a in answers]), samples, seed)
        acc_pos = by_position(answers, positions)
        details.append(
            G.SystemDetail(
                system=name,
                accuracy=round(acc, 4),
                accuracy_ci=(round(low or 0.0, 4), round(high or 0.0, 4)),
                memory_score=memory_score(acc, s_random, s_upper),
                accuracy_by_position=acc_pos,
                memory_score_by_position=[
                    memory_score(a, r, u)
                    for a, r, u in zip(acc_pos, random_pos, upper_pos, strict=True)
                ],
                diagnosis={
                    d: round(sum(a.diagnosis == d for a in answers) / max(1, len(answers)), 4)
                    for d in DIAGNOSES
                },
                off_policy_accuracy=round(accuracy(off_answers), 4),
                off_policy_memory_score=memory_score(accuracy(off_answers), s_random, s_upper),
                answers=len(answers),
            )
        )
    on_rank = ranks({d.system: d.memory_score for d in details})
    off_rank = ranks({d.system: d.off_policy_memory_score for d in details})
    report = G.GymReport(
        results=[
            G.SystemResult(
                system=d.system,
                accuracy=d.accuracy,
                accuracy_ci=d.accuracy_ci,
                memory_score=d.memory_score,
                accuracy_by_position=d.accuracy_by_position,
            )
            for d in details
        ],
        bounds=G.Bounds(random=round(s_random, 4), upper=round(s_upper, 4)),
        rank_change=[
            G.RankChange(
                system=d.system,
                on_policy_rank=on_rank[d.system],
                off_policy_rank=off_rank[d.system],
            )
            for d in details
        ],
        exposure_rate=0.0,
    )
    return details, random_pos, upper_pos, report


def table(result: G.GymResult) -> str:
    """What `clonemem gym` prints: accuracy by position, memory scores, diagnosis, and the rank table."""
    n = len(result.random_by_position)
    head = f"{'system':<16} {'accuracy':>9} {'95% CI':>15} {'memory':>7}  " + " ".join(
        f"{f'p{p}':>5}" for p in range(n)
    )
    lines = [
        f"gym {result.config_name}: {result.personas} persona(s), N_p={result.periods}, "
        f"N_s={result.states_per_question}, N_i={result.turns_per_exposure}; exposure "
        f"{result.exposure_rate:.1%} of {result.exposure_openings} openings (gate passed)",
        "",
        "accuracy by evaluation position",
        head,
        "-" * len(head),
    ]
    for d in result.systems:
        ci = f"[{d.accuracy_ci[0]:.3f}, {d.accuracy_ci[1]:.3f}]"
        lines.append(
            f"{d.system:<16} {d.accuracy:>9.3f} {ci:>15} {d.memory_score:>7.3f}  "
            + " ".join(f"{a:>5.2f}" for a in d.accuracy_by_position)
        )
    for name, row, overall in (
        ("random bound", result.random_by_position, result.report.bounds.random),
        ("upper bound", result.upper_by_position, result.report.bounds.upper),
    ):
        lines.append(
            f"{name:<16} {overall:>9.3f} {'':>15} {'':>7}  " + " ".join(f"{a:>5.2f}" for a in row)
        )
    lines += ["", "memory score by evaluation position (S - S_random) / (S_UB - S_random)"]
    for d in result.systems:
        lines.append(
            f"{d.system:<16} " + " ".join(f"{a:>5.2f}" for a in d.memory_score_by_position)
        )
    lines += ["", f"{'misses by cause':<16} " + " ".join(f"{x:>8}" for x in DIAGNOSES)]
    for d in result.systems:
        lines.append(f"{d.system:<16} " + " ".join(f"{d.diagnosis[x]:>8.3f}" for x in DIAGNOSES))
    lines += [
        "",
        f"on- vs off-policy (off-policy: each memory fed {result.reference}'s transcript)",
        f"{'system':<16} {'on memory':>10} {'off memory':>11} {'on rank':>8} {'off rank':>9} {'Δrank':>6}",
    ]
    by_name = {r.system: r for r in result.report.rank_change}
    for d in result.systems:
        r = by_name[d.system]
        lines.append(
            f"{d.system:<16} {d.memory_score:>10.3f} {d.off_policy_memory_score:>11.3f} {r.on_policy_rank:>8} "
            f"{r.off_policy_rank:>9} {r.off_policy_rank - r.on_policy_rank:>+6}"
        )
    return "\n".join(lines)
