"""Notes: markdown files with front matter, and documents read into notes."""
