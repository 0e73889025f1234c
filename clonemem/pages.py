"""The dashboard's pages: what the app navigates and what run artifacts link to (one table for both)."""

from __future__ import annotations

# (title, script under views/, url path): the navigation order. The first page is the default, served at
# the root URL (Streamlit gives the default page no path of its own).
PAGES: tuple[tuple[str, str, str], ...] = (
    ("Benchmarks", "views/benchmarks.py", ""),
    ("Generation", "views/generation.py", "generation"),
    ("QA quality", "views/qa_quality.py", "qa-quality"),
    ("Question inspector", "views/inspector.py", "inspector"),
    ("Leaderboard", "views/leaderboard.py", "leaderboard"),
    ("History", "views/history.py", "history"),
    ("Gym", "views/gym.py", "gym"),
    ("Runs", "views/runs.py", "runs"),
    ("Calls", "views/calls.py", "calls"),
)
