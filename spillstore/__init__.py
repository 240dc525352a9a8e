"""spillstore."""
