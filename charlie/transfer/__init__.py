"""Data in and out: export and restore archives, backups, and imports of
conversation history."""
