"""Replay of explored schedules on the real stack (`driftlab replay`, docs/explore.md)."""
