"""Analysis of a recorded history: reference checks, PySpark jobs and graph checks."""
