"""The web adapter: the JSON API and the PWA's static files, served by `charlie serve`."""
