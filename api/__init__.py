"""`swarmkit serve`: the HTTP front door, a peer of the CLI on the same store.

Imported only by the `serve` verb (and tests): FastAPI and uvicorn load for it alone.
Seams: app.py (the app factory, errors, body limit), jobs.py (job routes and acts),
events.py (events, the stream, the audit), auth.py (tokens), metrics.py, run.py (the verb).
"""
