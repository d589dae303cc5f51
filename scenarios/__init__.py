"""The scenario catalogue: one entry per claim of CLAIMS.md, and more."""
