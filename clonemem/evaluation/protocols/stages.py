"""The standard protocols' LLM steps: an answerer per answer style (what each protocol scores) and a
judge per protocol that has one, each with its prompt template and offline handler."""

from __future__ import annotations

from clonemem.schemas import evaluation as ev
from clonemem.stages import Stage, define

_OFFLINE = "clonemem.offline.world.protocols"

ANSWER_LOCOMO = define(
    "protocol.locomo_answer",
    "protocol_locomo_answer",
    "answerer",
    ev.ProtocolAnswerInput,
    ev.FreeAnswer,
    offline=f"{_OFFLINE}:locomo_answer",
)
ANSWER_LONGMEMEVAL = define(
    "protocol.longmemeval_answer",
    "protocol_longmemeval_answer",
    "answerer",
    ev.ProtocolAnswerInput,
    ev.FreeAnswer,
    offline=f"{_OFFLINE}:longmemeval_answer",
)
JUDGE_MEM0 = define(
    "protocol.mem0_judge",
    "protocol_mem0_judge",
    "judge",
    ev.Mem0JudgeInput,
    ev.Mem0Verdict,
    offline=f"{_OFFLINE}:mem0_judge",
)
JUDGE_LONGMEMEVAL = define(
    "protocol.longmemeval_judge",
    "protocol_longmemeval_judge",
    "judge",
    ev.LongMemEvalJudgeInput,
    ev.YesNoReply,
    offline=f"{_OFFLINE}:longmemeval_judge",
)

ANSWERERS: dict[str, Stage] = {"locomo": ANSWER_LOCOMO, "longmemeval": ANSWER_LONGMEMEVAL}
JUDGES: dict[str, Stage] = {"mem0": JUDGE_MEM0, "longmemeval": JUDGE_LONGMEMEVAL}
ALL = (ANSWER_LOCOMO, ANSWER_LONGMEMEVAL, JUDGE_MEM0, JUDGE_LONGMEMEVAL)
