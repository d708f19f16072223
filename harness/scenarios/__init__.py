"""Scenario files: the model and its YAML, simulated tools, the provider a
scenario names, the runner, the verdict against `expect`, recording a remote
scenario's cassette, the fault matrix, and scenario files as pytest items."""
