"""Spill storage: the store protocol with its shared operations, and the backends."""
