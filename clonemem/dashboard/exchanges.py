"""How a stored LLM exchange is shown (the Calls page and the Question inspector): the prompt's turns, then
the model's reply; or why they were not stored."""

from __future__ import annotations

import json

import streamlit as st

NOT_STORED = (
    "Prompt and reply not stored for this call: the config's [logging] store_calls keeps them for "
    'offline calls by default ("all" keeps live ones too; calls made before this warehouse\'s '
    "migration 0018 have none)."
)


def turns(prompt_text: str | None) -> list[dict[str, str]]:
    """The stored prompt as [{"role", "content"}, ...] (system first); [] when none was stored."""
    if not prompt_text:
        return []
    return [
        {"role": str(t.get("role")), "content": str(t.get("content"))}
        for t in json.loads(prompt_text)
    ]


def show(prompt_text: str | None, response_text: str | None, error: str | None = None) -> None:
    if error:
        st.caption(f"error: {error}")
    if prompt_text is None:
        st.caption(NOT_STORED)
        return
    for turn in turns(prompt_text):
        st.markdown(f"**{turn['role']}**")
        st.text(turn["content"])
    st.markdown("**reply**")
    st.text(response_text if response_text is not None else "(no reply)")
