"""The gym's LLM steps: the structured data (generator, with the validator's exposure check), the
simulated user (the ``user_sim`` role) and the assistant under test (the answerer role)."""

from __future__ import annotations

from clonemem.schemas import gym as G
from clonemem.stages import define

SCHEMA = define(
    "gym.schema",
    "gym_schema",
    "generator",
    G.StateSchemaInput,
    G.StateSchema,
    offline="clonemem.offline.world.gym:state_schema",
)
EVOLUTION = define(
    "gym.evolution",
    "gym_evolution",
    "generator",
    G.EvolutionInput,
    G.Evolution,
    offline="clonemem.offline.world.gym:evolution",
)
QUESTIONS = define(
    "gym.questions",
    "gym_questions",
    "generator",
    G.QuestionsInput,
    G.QuestionsOut,
    offline="clonemem.offline.world.gym:questions",
)
OPTIONS = define(
    "gym.options",
    "gym_options",
    "generator",
    G.OptionsInput,
    G.OptionsOut,
    offline="clonemem.offline.world.gym:options",
)
UTTERANCE = define(
    "gym.utterance",
    "gym_utterance",
    "generator",
    G.UtteranceInput,
    G.Utterance,
    offline="clonemem.offline.world.gym:utterance",
)
EXPOSURE = define(
    "gym.exposure",
    "gym_exposure",
    "validator",
    G.ExposureInput,
    G.ExposureOut,
    offline="clonemem.offline.world.gym:exposure",
)
USER_TURN = define(
    "gym.user_turn",
    "gym_user_turn",
    "user_sim",
    G.UserTurnInput,
    G.UserTurn,
    offline="clonemem.offline.world.gym:user_turn",
)
ASSISTANT = define(
    "gym.assistant",
    "gym_assistant",
    "answerer",
    G.AssistantInput,
    G.AssistantReply,
    offline="clonemem.offline.world.gym:assistant_reply",
)
ANSWER = define(
    "gym.answer",
    "gym_answer",
    "answerer",
    G.GymAnswerInput,
    G.GymAnswer,
    offline="clonemem.offline.world.gym:answer",
)

BLUEPRINT_STAGES = (SCHEMA, EVOLUTION, QUESTIONS, OPTIONS, UTTERANCE, EXPOSURE)
INTERACTION_STAGES = (USER_TURN, ASSISTANT, ANSWER)
