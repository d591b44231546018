"""The methods every target serves, as plain functions."""


def subtract(minuend: int, subtrahend: int) -> int:
    """Return minuend minus subtrahend."""
    return minuend - subtrahend


def describe(name: str, count: int, ratio: float, active: bool, tags: list) -> int:
    """Take five annotated params (the cost of checking them); return count plus the tag count."""
    return count + len(tags)
