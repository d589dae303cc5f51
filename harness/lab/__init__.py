"""The lab toolkit: services, the setup contract, workload, nemesis, the
scenario vocabulary, the lifecycle and the run, replay and explore engines, the
importers and the test helpers."""
