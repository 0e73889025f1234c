"""A gym run into the warehouse in one transaction: the run's row in ``gym_runs`` with its provenance,
each persona's states per period, every on-policy session and turn, every answer (on- and off-policy),
the metrics, the LLM calls it paid for, and the finished ``runs`` row that owns them."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from clonemem.codehash import code_hash
from clonemem.evaluation.land import land_calls
from clonemem.evaluation.provenance import git_state, system_provenance
from clonemem.gym.interact import CONTROLS, Interaction
from clonemem.llm.types import CallRecord
from clonemem.schemas import gym as G
from clonemem.schemas.config import ROLES, RunConfig
from clonemem.warehouse import Warehouse
from clonemem.warehouse.landing import new_calls
from clonemem.warehouse.runs import RunRecord, adopt_runs, record_run

GYM_CODE = (
    "clonemem.gym.blueprint",
    "clonemem.gym.interact",
    "clonemem.gym.metrics",
    "clonemem.gym.run",
)


def provenance(config: RunConfig, systems: Sequence[str]) -> dict[str, Any]:
    commit, dirty = git_state()
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "seed": config.seed,
        "models": {role: str(config.models.ref(role)) for role in ROLES},
        "code": {m: code_hash(m) for m in GYM_CODE},
        "systems": {
            s: (
                system_provenance(s, config).model_dump(mode="json")
                if s not in CONTROLS
                else {"system": s, "code_hash": code_hash("clonemem.gym.interact")}
            )
            for s in systems
        },
    }


def gym_rows(
    gym_run_id: str,
    blueprints: Sequence[G.Blueprint],
    on: Mapping[str, Sequence[Interaction]],
    off: Mapping[str, Sequence[Interaction]],
    result: G.GymResult,
) -> dict[str, list[dict[str, Any]]]:
    sessions, turns = _conversation_rows(gym_run_id, blueprints, on)
    return {
        "gym_states": _state_rows(gym_run_id, blueprints),
        "gym_sessions": sessions,
        "gym_turns": turns,
        "gym_answers": _answer_rows(gym_run_id, blueprints, on, off),
        "gym_metrics": _metric_rows(gym_run_id, result),
    }


def _state_rows(gym_run_id: str, blueprints: Sequence[G.Blueprint]) -> list[dict[str, Any]]:
    rows = []
    for b in blueprints:
        labels = {v.name: v.label for v in b.state_schema.variables}
        for t, p in enumerate(b.states):
            before = b.state_at(t - 1) if t else {}
            rows += [
                {
                    "gym_run_id": gym_run_id,
                    "persona_id": b.persona_id,
                    "person_key": b.person_key,
                    "period": t,
                    "period_date": b.periods[t].date,
                    "event_title": b.periods[t].title,
                    "variable": s.variable,
                    "label": labels[s.variable],
                    "value": s.value,
                    "changed": t > 0 and before[s.variable] != s.value,
                }
                for s in p.states
            ]
    return rows


def _conversation_rows(
    gym_run_id: str, blueprints: Sequence[G.Blueprint], on: Mapping[str, Sequence[Interaction]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    openings = {(b.persona_id, o.period, o.index): o for b in blueprints for o in b.openings}
    sessions, turns = [], []
    for system, interactions in on.items():
        for i in interactions:
            counts: dict[tuple[int, int], int] = {}
            for turn in i.turns:
                counts[(turn.period, turn.session)] = counts.get((turn.period, turn.session), 0) + 1
                turns.append(
                    {
                        "gym_run_id": gym_run_id,
                        "system": system,
                        "persona_id": i.persona_id,
                        "trace_id": turn.trace_id,
                        "period": turn.period,
                        "session": turn.session,
                        "turn": turn.turn,
                        "speaker": turn.speaker,
                        "text": turn.text,
                        "said_at": turn.at,
                    }
                )
            for (period, session), n in sorted(counts.items()):
                o = openings[(i.persona_id, period, session)]
                sessions.append(
                    {
                        "gym_run_id": gym_run_id,
                        "system": system,
                        "persona_id": i.persona_id,
                        "period": period,
                        "session": session,
                        "opening": o.text,
                        "exposed_json": json.dumps([s.model_dump() for s in o.exposed]),
                        "recovered": o.ok,
                        "turns": n,
                    }
                )
    return sessions, turns


def _answer_rows(
    gym_run_id: str,
    blueprints: Sequence[G.Blueprint],
    on: Mapping[str, Sequence[Interaction]],
    off: Mapping[str, Sequence[Interaction]],
) -> list[dict[str, Any]]:
    questions = {q.question_id: q.question for b in blueprints for q in b.questions}
    return [
        {
            "gym_run_id": gym_run_id,
            "system": system,
            "policy": policy,
            "persona_id": i.persona_id,
            "position": a.position,
            "question_id": a.question_id,
            "question": questions[a.question_id],
            "choice_id": a.choice_id,
            "correct_id": a.correct_id,
            "correct": a.correct,
            "options": a.options,
            "diagnosis": a.diagnosis,
        }
        for policy, runs in (("on", on), ("off", off))
        for system, interactions in runs.items()
        for i in interactions
        for a in i.answers
    ]


def _metric_rows(gym_run_id: str, result: G.GymResult) -> list[dict[str, Any]]:
    def metric(
        system: str,
        policy: str,
        position: int | None,
        name: str,
        value: float,
        ci: tuple[float, float] | None = None,
    ) -> dict[str, Any]:
        return {
            "gym_run_id": gym_run_id,
            "system": system,
            "policy": policy,
            "position": position,
            "metric": name,
            "value": value,
            "ci_low": ci[0] if ci else None,
            "ci_high": ci[1] if ci else None,
        }

    ranks = {r.system: r for r in result.report.rank_change}
    metrics = []
    for d in result.systems:
        metrics += [
            metric(d.system, "on", None, "accuracy", d.accuracy, d.accuracy_ci),
            metric(d.system, "on", None, "memory_score", d.memory_score),
            metric(d.system, "off", None, "accuracy", d.off_policy_accuracy),
            metric(d.system, "off", None, "memory_score", d.off_policy_memory_score),
            metric(d.system, "on", None, "rank", ranks[d.system].on_policy_rank),
            metric(d.system, "off", None, "rank", ranks[d.system].off_policy_rank),
        ]
        metrics += [
            metric(d.system, "on", None, cause, share) for cause, share in d.diagnosis.items()
        ]
        metrics += [
            metric(d.system, "on", p, "accuracy", v) for p, v in enumerate(d.accuracy_by_position)
        ]
        metrics += [
            metric(d.system, "on", p, "memory_score", v)
            for p, v in enumerate(d.memory_score_by_position)
        ]
    for name, row, overall in (
        ("random", result.random_by_position, result.report.bounds.random),
        ("upper", result.upper_by_position, result.report.bounds.upper),
    ):
        metrics.append(metric("(bounds)", "on", None, name, overall))
        metrics += [metric("(bounds)", "on", p, name, v) for p, v in enumerate(row)]
    return metrics


def land_gym(
    wh: Warehouse,
    run: RunRecord,
    config: RunConfig,
    systems: Sequence[str],
    blueprints: Sequence[G.Blueprint],
    on: Mapping[str, Sequence[Interaction]],
    off: Mapping[str, Sequence[Interaction]],
    result: G.GymResult,
    calls: Sequence[CallRecord],
) -> None:
    """Everything of one gym run, its calls and its finished run row, in one transaction."""
    rows = gym_rows(run.run_id, blueprints, on, off, result)
    calls = new_calls(wh, calls)
    with wh.transaction():
        wh.upsert(
            "gym_runs",
            [
                {
                    "gym_run_id": run.run_id,
                    "run_id": run.run_id,
                    "config_name": config.name,
                    "systems": json.dumps(list(systems)),
                    "reference": config.gym.reference,
                    "periods": config.gym.periods,
                    "states_per_question": config.gym.states_per_question,
                    "turns_per_exposure": config.gym.turns_per_exposure,
                    "exposure_rate": result.exposure_rate,
                    "random_bound": result.report.bounds.random,
                    "upper_bound": result.report.bounds.upper,
                    "config_json": config.model_dump_json(exclude={"warehouse"}),
                    "provenance_json": json.dumps(provenance(config, systems)),
                    "report_json": result.report.model_dump_json(),
                    "started_at": run.started_at,
                    "finished_at": dt.datetime.now(dt.UTC).replace(tzinfo=None),
                }
            ],
        )
        for table, table_rows in rows.items():
            if table_rows:
                wh.insert(table, table_rows)  # a new run id: every row is new
        record_run(wh, run.finished("completed", summary_json=result.report.model_dump_json()))
        land_calls(wh, calls)
        # calls served from the cache, made by an earlier gym run that never landed: their run gets a row
        adopt_runs(
            wh, [c for c in calls if c.run_id != run.run_id], "gym", run.benchmark_id, "interrupted"
        )
