"""List prices (USD per million tokens) used for cost accounting; `[pricing]` in a config
overrides or extends them. A model with no known price gets a NULL cost, never a guessed one."""

from __future__ import annotations

from clonemem.schemas.config import ModelPrice, RunConfig

# Public list prices, standard tier (USD per million tokens), as the providers published them in
# November 2025; check them before trusting an estimate, and override them under [pricing].
PRICES_AS_OF = "2025-11"
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "anthropic/claude-haiku-4-5": ModelPrice(input_per_mtok=1.0, output_per_mtok=5.0),
    "anthropic/claude-sonnet-4-5": ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0),
    "openai/gpt-4o-mini": ModelPrice(input_per_mtok=0.15, output_per_mtok=0.60),
    "openai/gpt-4o": ModelPrice(input_per_mtok=2.50, output_per_mtok=10.0),
    "openai/gpt-4.1": ModelPrice(
        input_per_mtok=2.0, output_per_mtok=8.0
    ),  # AMemGym's model, for comparison
    "gemini/gemini-2.5-flash": ModelPrice(input_per_mtok=0.30, output_per_mtok=2.50),
}


def price_for(ref: str, config: RunConfig) -> ModelPrice | None:
    """The config's price, else the list price; the offline provider is free unless the config prices it
    (which rehearses a cost budget without any network)."""
    if ref in config.pricing:
        return config.pricing[ref]
    if ref.startswith("offline/"):
        return ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)
    return DEFAULT_PRICES.get(ref)


def cost_usd(price: ModelPrice | None, input_tokens: int, output_tokens: int) -> float | None:
    if price is None:
        return None
    return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1_000_000
