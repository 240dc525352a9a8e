"""The decision point: TruncationService, its flow and drivers, streaming, and wrap."""
