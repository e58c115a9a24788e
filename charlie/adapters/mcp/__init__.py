"""Charlie as a Model Context Protocol server: notes, memory and recall for other apps.

`charlie mcp --user NAME` serves one person over stdio (Claude Desktop and the like start
it); the web app serves everyone at `/mcp` over streamable HTTP, each caller known by a
personal bearer token (`charlie.household.tokens`). Both run the same tools (`catalog`), which call
the same core functions as chat, the CLI and the app.
"""
