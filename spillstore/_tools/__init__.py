"""The model-facing recovery tools: Read, Grep and List over spills (design.md §5)."""
