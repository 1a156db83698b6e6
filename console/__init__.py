"""The operator console `swarmkit-console`."""
