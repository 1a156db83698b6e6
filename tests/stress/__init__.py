"""The race harness: workers, actors and a sampler racing on one store, then invariants checked.

CI runs a bounded round per store (tests/stress/test_race.py); by hand:

    python -m tests.stress.race --workers 4 --runs 200 --acts 2000 --store URL
"""
