"""The answerer's and the judge's LLM steps."""

from __future__ import annotations

from clonemem.schemas import evaluation as ev
from clonemem.stages import define

ANSWER_FREE = define(
    "eval.answer_free",
    "eval_answer_free",
    "answerer",
    ev.AnswerInput,
    ev.FreeAnswer,
    offline="clonemem.offline.world.evaluation:answer_free",
)
ANSWER_CHOICE = define(
    "eval.answer_choice",
    "eval_answer_choice",
    "answerer",
    ev.AnswerInput,
    ev.ChoiceAnswer,
    offline="clonemem.offline.world.evaluation:answer_choice",
)
JUDGE = define(
    "eval.judge",
    "eval_judge",
    "judge",
    ev.JudgeInput,
    ev.JudgeVerdict,
    offline="clonemem.offline.world.evaluation:judge",
)
SUPPORT = define(
    "eval.support",
    "eval_support",
    "judge",
    ev.SupportInput,
    ev.SupportVerdict,
    offline="clonemem.offline.world.evaluation:support",
)
PRIVACY_RESPOND = define(
    "eval.privacy_respond",
    "eval_privacy_respond",
    "answerer",
    ev.PrivacyRespondInput,
    ev.FreeAnswer,
    offline="clonemem.offline.world.evaluation:privacy_respond",
)
PRIVACY_JUDGE = define(
    "eval.privacy_judge",
    "eval_privacy_judge",
    "judge",
    ev.PrivacyJudgeInput,
    ev.PrivacyVerdict,
    offline="clonemem.offline.world.evaluation:privacy_judge",
)
