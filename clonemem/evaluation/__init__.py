"""Evaluation (SPEC §5): answerer and judge steps, metrics, aggregation."""
