"""lavaflow.sim."""
