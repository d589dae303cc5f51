"""The runner: one scenario run from a fresh run directory to a verdict."""
