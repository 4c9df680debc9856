"""Optimization and Trainer integration: LAMB, learning-rate schedules, callbacks."""
