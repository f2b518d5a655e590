"""The web page's server side: HTTP in the server's process (`--http-uri`), its API and the live dictionary.

:mod:`.app` serves the page and guards every request, :mod:`.api` answers
the page's calls through the server's one inference worker, and
:mod:`.dictionary` saves and applies the one file the page may change.
"""
