"""`driftlab explore pipeline.toml`: a search over a pipeline's fault schedules, each
candidate one real run, and the shrinking of a failing schedule (docs/explore-pipelines.md)."""
