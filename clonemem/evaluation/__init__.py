"""Evaluation: answerer and judge steps, metrics, aggregation."""
