"""The people of a home: sign-ins, API tokens, Discord links, removing someone,
the trash, and forgetting for good."""
