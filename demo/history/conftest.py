# The library trees under <repo>/base/ are separate projects (built into git
# repositories by build_history.py); keep a pytest run over demo/ from
# collecting their tests.
collect_ignore = ["configkit", "textstats", "invledger"]
