"""Your own pipeline under test: a pipeline file (spec), its processes and stores wired
onto the stack (setup, links), observed from outside (observer, readers), run and
judged (run). docs/pipelines.md is the user's guide."""
