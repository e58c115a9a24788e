"""Finding things again: the search index of notes and messages, hybrid search,
conversation recall, the usage model and suggested notes."""
