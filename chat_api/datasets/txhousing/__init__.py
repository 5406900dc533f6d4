"""Texas housing market (ggplot2 txhousing): build, Cube model and eval questions."""

from chat_api.datasets.txhousing.build import build

__all__ = ["build"]
