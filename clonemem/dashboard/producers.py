"""Which model produced which figure of an evaluation, so that figures the offline answerer or judge
made (deterministic heuristics, not language models) say so wherever they are shown."""

from __future__ import annotations

from dataclasses import dataclass

from clonemem.dashboard import queries as Q
from clonemem.schemas.results import DIAGNOSIS, JUDGED, PRIVACY
from clonemem.warehouse.guard import GuardedConnection

# metric -> the evaluation roles whose output it scores (recall metrics need neither: they read retrievals)
PRODUCERS: dict[str, tuple[str, ...]] = {
    "choice_accuracy": ("answerer",),
    "qa_consistency": ("answerer", "judge"),
    "qa_hallucination_rate": ("answerer", "judge"),
    "qa_perfect_rate": ("answerer", "judge"),
    "mem_recall": ("judge",),
    "mem_helpful": ("judge",),
    "mem_covered": ("judge",),  # the judge's raw count behind mem_recall (the inspector's verdicts)
    # the diagnosis: written/read decided with the judge for transformed items, use by the answer
    **{
        m: ("answerer", "judge") for m in (*DIAGNOSIS, "diagnosis")
    },  # "diagnosis": the inspector's column
    **{m: ("answerer", "judge") for m in PRIVACY},  # the clone's reply, judged item by item
}
assert set(JUDGED) <= set(PRODUCERS)


@dataclass(frozen=True)
class EvalModels:
    """The answerer and judge of one evaluation and whether each is the offline heuristic."""

    answerer: str | None
    judge: str | None
    answerer_offline: bool
    judge_offline: bool

    def offline_roles(self, metric: str) -> list[str]:
        """The roles behind ``metric`` that were offline heuristics in this evaluation."""
        offline = {"answerer": self.answerer_offline, "judge": self.judge_offline}
        return [r for r in PRODUCERS.get(metric, ()) if offline[r]]

    def label(self, metric: str) -> str:
        """``metric`` as shown: with ``(offline answerer)``, ``(offline judge)`` or both when so produced."""
        roles = self.offline_roles(metric)
        return f"{metric} (offline {' + '.join(roles)})" if roles else metric

    @property
    def any_offline(self) -> bool:
        return self.answerer_offline or self.judge_offline

    def banner(self) -> str | None:
        """One sentence naming the offline roles and the figures they produced, or None."""
        roles = [
            f"answerer `{self.answerer}`" if self.answerer_offline else None,
            f"judge `{self.judge}`" if self.judge_offline else None,
        ]
        named = [r for r in roles if r]
        if not named:
            return None
        return (
            "Offline heuristics, not language models: the "
            + " and the ".join(named)
            + ". Every figure they produced is labelled “offline” (choice accuracy, the judged qa_* and "
            "mem_* scores, the write/read/use diagnosis); recall metrics read retrievals only."
        )


def offline_ref(ref: str | None) -> bool:
    """A ``provider/model`` reference of the offline provider."""
    return ref is not None and ref.split("/", 1)[0] == "offline"


def models_of(db: GuardedConnection, eval_run_id: str, eval_run_columns: list[str]) -> EvalModels:
    """The evaluation's answerer and judge as stored (see ``queries.eval_models``)."""
    frame = Q.eval_models(db, eval_run_id, eval_run_columns)
    if frame.height == 0:
        return EvalModels(None, None, False, False)
    row = frame.row(0, named=True)
    return EvalModels(
        answerer=row["answerer"],
        judge=row["judge"],
        answerer_offline=bool(row["answers_offline"]) or offline_ref(row["answerer"]),
        judge_offline=bool(row["judge_calls_offline"]) or offline_ref(row["judge"]),
    )
