"""Portuguese resort hotel bookings (modeldata hotel_rates): build, Cube model, eval questions."""

from chat_api.datasets.resort_hotel.build import build

__all__ = ["build"]
