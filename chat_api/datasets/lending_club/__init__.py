"""Lending Club consumer loans (openintro loans_full_schema): build, Cube model, eval questions."""

from chat_api.datasets.lending_club.build import build

__all__ = ["build"]
