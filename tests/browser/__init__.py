"""Browser tests of the PWA (a package, so that its conftest and helpers have their own names)."""
