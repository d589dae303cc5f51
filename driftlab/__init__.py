"""driftlab: a consistency test harness and fault-injection lab for
data-integration architectures."""
