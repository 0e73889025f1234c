"""Real-API smoke tests: marked `live`, skipped unless CLONEMEM_LIVE_TESTS=1 and the provider's key is set."""

from __future__ import annotations

import os

import pytest
from pydantic import BaseModel

from clonemem import prompts
from clonemem.llm.model import get_model
from clonemem.schemas.config import RunConfig

pytestmark = pytest.mark.live

CASES = [
    ("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY"),
    ("gemini/gemini-2.5-flash", "GEMINI_API_KEY"),
    ("openai/gpt-4o-mini", "OPENAI_API_KEY"),
]


class Capital(BaseModel):
    country: str
    capital: str


@pytest.mark.parametrize(("ref", "key"), CASES)
def test_live_structured_call(ref: str, key: str) -> None:
    if os.environ.get("CLONEMEM_LIVE_TESTS") != "1" or not os.environ.get(key):
        pytest.skip(f"live test: set CLONEMEM_LIVE_TESTS=1 and {key}")
    model = get_model(RunConfig.model_validate({"models": {"judge": ref}}), "judge")
    prompt = prompts.Prompt("live", "Answer with facts.", "What is the capital of France?", "h")
    got = model.structured(model.request("live.smoke", prompt, schema=Capital), Capital)
    assert got.capital.lower() == "paris"
