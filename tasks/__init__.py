"""Prefect tasks: small typed units with retries and cross-run caching."""
