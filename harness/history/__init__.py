"""The run history: schema, recorder and reader."""
