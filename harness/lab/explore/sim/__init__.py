"""Models of the components, one module each, and the simulator's history recorder."""
