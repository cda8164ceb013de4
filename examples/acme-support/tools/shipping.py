"""Function tool of the acme-support example: parcel tracking."""

from __future__ import annotations

PARCELS: dict[str, str] = {
    "1Z999AA10123456784": "out for delivery, expected today by 8 pm",
    "7489 2215 0093": "in transit, expected in 2 days",
}


def track_shipment(carrier: str, tracking_number: str) -> str:
    """Where a parcel is, by carrier and tracking number."""
    key = tracking_number.strip().upper()
    status = PARCELS.get(key)
    if status is None:
        return f"{carrier.upper()} has no parcel {tracking_number}."
    return f"{carrier.upper()} parcel {key} is {status}."
