"""Packet families; one module per family, each packet a frozen dataclass."""
