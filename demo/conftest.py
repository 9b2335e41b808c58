# The task snapshots are separate projects (with deliberately failing hidden
# tests and seven copies of each package); keep a pytest run from the project
# root from collecting them.
collect_ignore = ["tasks"]
