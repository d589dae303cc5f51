"""HTML rendering of run reports and the suite page."""
