"""Every LLM step of stage IV."""

from __future__ import annotations

from clonemem.schemas import qa
from clonemem.stages import define

PLAN = define("qa.plan", "qa_plan", "qa_writer", qa.PlanInput, qa.QAPlan)
WRITE = define("qa.write", "qa_write", "qa_writer", qa.WriteInput, qa.QADraft)
SUFFICIENCY = define("qa.sufficiency", "qa_sufficiency", "validator", qa.SufficiencyInput, qa.SufficiencyVerdict)
DISTRACTORS = define("qa.distractors", "qa_distractors", "qa_writer", qa.DistractorInput, qa.Distractors)
DISTRACTOR_CHECK = define("qa.distractor_check", "qa_distractor_check", "validator", qa.ChoiceInput, qa.ChoiceAttempt)
