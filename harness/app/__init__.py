"""The application: what `driftlab` and the pytest plugin ask for (a run, a suite, a
matrix, a replay), put together from the layers below. It is the one place that looks a
setup, a simulated setup or a replay driver up by name and hands it to the engine, and
the one that analyses, judges and renders a run's report."""
