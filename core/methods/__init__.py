"""Importing this package registers every method in ``core.registry`` (registration order = display order)."""

from core.methods import exact  # noqa: F401  (first: the reference)
