"""Function tools of the acme-support example."""

ORDERS = {"A-1001": "shipped", "A-1002": "processing"}


def order_status(order_id: str) -> str:
    """The status of one order."""
    status = ORDERS.get(order_id)
    if status is None:
        raise KeyError(f"no order {order_id}")
    return f"Order {order_id} has {status}."
