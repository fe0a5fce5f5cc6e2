"""The value benchmark's tables of the ratio settings, the natural federations and the end-to-end comparison."""
TABLES = {}
