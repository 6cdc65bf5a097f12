"""lavaflow.api."""
