"""Prefect flows: they orchestrate tasks and nothing else."""
