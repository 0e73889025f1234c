"""The gym's gate: before any assistant is evaluated, the openings must expose the states they were
written for. One GX expectation over the exposure check's rows (one per opening: whether the
validator recovered every state it was meant to reveal): the mean is at least the config's
``gym.min_exposure_rate`` (0.95 by default; AMemGym's human check found 99.1%)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from clonemem.errors import ExitCode, UserError
from clonemem.schemas.gym import Blueprint


@dataclass(frozen=True)
class ExposureGate:
    rate: float
    min_rate: float
    openings: int
    passed: bool
    failing: list[str] = field(
        default_factory=list
    )  # "persona P2U1: text" of openings not recovered


class ExposureGateFailed(UserError):
    exit_code: ClassVar[ExitCode] = ExitCode.GATE_FAILED


def exposure_gate(blueprints: list[Blueprint], min_rate: float) -> ExposureGate:
    """Validate the exposure rows with GX (an in-memory batch: nothing is in the warehouse yet)."""
    import logging

    import great_expectations as gx
    import pandas as pd
    from great_expectations.data_context.types.base import ProgressBarsConfig

    rows = [
        {
            "persona": b.person_key,
            "opening": f"P{o.period}U{o.index + 1}",
            "text": o.text,
            "recovered": 1.0 if o.ok else 0.0,
        }
        for b in blueprints
        for o in b.openings
    ]
    if not rows:
        return ExposureGate(0.0, min_rate, 0, False)
    frame = pd.DataFrame(rows)
    # an ephemeral context announces its temporary docs folder at INFO: nothing the user needs
    logging.getLogger("great_expectations.data_context.types.base").setLevel(logging.WARNING)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (
        context.data_sources.add_pandas("gym")
        .add_dataframe_asset("exposure")
        .add_batch_definition_whole_dataframe("openings")
        .get_batch(batch_parameters={"dataframe": frame})
    )
    result = batch.validate(
        gx.expectations.ExpectColumnMeanToBeBetween(
            column="recovered", min_value=min_rate, max_value=1.0
        )
    )
    rate = float(result.result.get("observed_value") or 0.0)
    failing = [
        f"persona {r['persona']} {r['opening']}: {r['text']}" for r in rows if not r["recovered"]
    ]
    return ExposureGate(round(rate, 4), min_rate, len(rows), bool(result.success), failing)


def require_exposure(gate: ExposureGate) -> None:
    if not gate.passed:
        first = f"; first not recovered: {gate.failing[0]}" if gate.failing else ""
        raise ExposureGateFailed(
            f"gym gate failed: {gate.rate:.1%} of {gate.openings} openings expose the states "
            f"they were written for, below gym.min_exposure_rate {gate.min_rate:.0%}{first}"
        )
