"""Function tools of the acme-support example: orders, cancellations and refunds.

Pure functions over a small in-memory order book, so every run sees the same data.
"""

from __future__ import annotations

from typing import NamedTuple


class Order(NamedTuple):
    status: str
    amount_usd: float


ORDERS: dict[str, Order] = {
    "A-1001": Order("shipped", 312.12),
    "A-1002": Order("processing", 45.00),
    "A-1003": Order("delivered", 89.90),
    "A-1004": Order("processing", 64.00),
    "A-1005": Order("cancelled", 19.99),
    "A-1006": Order("shipped", 150.00),
}

_STATUS_TEXT = {
    "shipped": "has shipped",
    "processing": "is being processed",
    "delivered": "was delivered",
    "cancelled": "was cancelled",
}


def order_status(order_id: str) -> str:
    """The status of one order, or a not-found message the model can pass on."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return f"No order {order_id} was found; please check the order number."
    return f"Order {order_id} {_STATUS_TEXT[order.status]}."


def cancel_order(order_id: str) -> str:
    """Cancel an order that has not shipped yet (the order book itself is not changed)."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return f"No order {order_id} was found; please check the order number."
    if order.status != "processing":
        return f"Order {order_id} cannot be cancelled: it {_STATUS_TEXT[order.status]}."
    return (
        f"Order {order_id} has been cancelled; the {order.amount_usd:.2f} USD payment "
        "will be refunded."
    )


def refund_quote(order_id: str, amount: float | str, reason: str) -> str:
    """Approve a refund of at most the order's amount."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return f"No order {order_id} was found; please check the order number."
    value = float(str(amount).replace("$", "").replace(",", ""))
    if value > order.amount_usd:
        return f"A refund of {value:.2f} USD exceeds the {order.amount_usd:.2f} USD paid."
    return (
        f"Refund of {value:.2f} USD for order {order_id} approved ({reason}); "
        "it reaches your card within 5 business days."
    )
