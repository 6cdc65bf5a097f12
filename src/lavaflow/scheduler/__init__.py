"""lavaflow.scheduler."""
