"""`swarmkit serve`: the HTTP front door (`swarmkit.api`), a peer of the CLI on the same store.

Imported only by the `serve` verb (and tests): FastAPI and uvicorn load for it alone. The browser
console (console/web.py) takes http_trust.py, the Host and Origin rule of both HTTP doors (stdlib only).
Seams: app.py (`create_app`: the app factory, errors, body limit), dependencies.py (what the routes
share: the context, scope checks, route errors), jobs.py (job routes and acts), events.py (events,
the stream, the audit), notifications.py, auth.py (tokens), metrics.py, run.py (the verb).
"""
