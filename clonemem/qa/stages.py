"""Every LLM step of stage IV."""

from __future__ import annotations

from clonemem.schemas import qa
from clonemem.stages import define

PLAN = define(
    "qa.plan",
    "qa_plan",
    "qa_writer",
    qa.PlanInput,
    qa.QAPlan,
    offline="clonemem.offline.world.qa:plan",
)
WRITE = define(
    "qa.write",
    "qa_write",
    "qa_writer",
    qa.WriteInput,
    qa.QADraft,
    offline="clonemem.offline.world.qa:write",
)
SUFFICIENCY = define(
    "qa.sufficiency",
    "qa_sufficiency",
    "validator",
    qa.SufficiencyInput,
    qa.SufficiencyVerdict,
    offline="clonemem.offline.world.qa:sufficiency",
)
DISTRACTORS = define(
    "qa.distractors",
    "qa_distractors",
    "qa_writer",
    qa.DistractorInput,
    qa.Distractors,
    offline="clonemem.offline.world.qa:distractors",
)
DISTRACTOR_CHECK = define(
    "qa.distractor_check",
    "qa_distractor_check",
    "validator",
    qa.ChoiceInput,
    qa.ChoiceAttempt,
    offline="clonemem.offline.world.qa:check_choice",
)
PRIVACY_PLAN = define(
    "qa.privacy_plan",
    "qa_privacy_plan",
    "qa_writer",
    qa.PrivacyPlanInput,
    qa.PrivacyPlan,
    offline="clonemem.offline.world.privacy:plan",
)
PRIVACY_WRITE = define(
    "qa.privacy_write",
    "qa_privacy_write",
    "qa_writer",
    qa.PrivacyWriteInput,
    qa.PrivacyDraft,
    offline="clonemem.offline.world.privacy:write",
)
