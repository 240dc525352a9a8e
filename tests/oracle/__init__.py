"""The reference-model oracle: random outputs through every entry point, every told fact checked."""
