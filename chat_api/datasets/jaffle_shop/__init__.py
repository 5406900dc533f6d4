"""Jaffle Shop dataset: a fictional café chain generated with jafgen, and its Cube model."""

from chat_api.datasets.jaffle_shop.build import build

__all__ = ["build"]
