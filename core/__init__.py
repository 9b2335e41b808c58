"""What every app shares and nothing else: roles, permissions, live publishing, typed
settings readers and the vocabulary. Imports no other Crucible app (only `sandbox`,
the plain-Python layer below it)."""
