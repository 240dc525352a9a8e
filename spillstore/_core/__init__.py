"""The pure core: cutting, previews, the pointer, ids, the line index, paging and gc plans.

Nothing in this package does I/O, reads the clock or reads the environment; a test
holds that rule. Every decision here is a function of its arguments, property-tested
in microseconds and shared by the service, the stores and the tools.
"""
