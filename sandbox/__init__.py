"""Sandboxed execution for agents and verifiers. Plain Python: imports nothing from Django."""
