"""Storing conversation history at chosen times, as an import does."""

from __future__ import annotations

from datetime import datetime

from charlie.conversations import Channel
from charlie.home import Home


def say(home: Home, channel: Channel, speaker: str, text: str, at: str, role: str = "user") -> int:
    """A message stored at time `at` (as an import stores history)."""
    cursor = home.db.execute(
        "INSERT INTO messages (conversation_id, project_id, private, role, user_id, speaker, "
        "content, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            channel.conversation_id,
            channel.project.id if channel.project else None,
            int(channel.private),
            role,
            channel.owner.id if channel.owner and role == "user" else None,
            speaker,
            text,
            datetime.fromisoformat(at).isoformat(timespec="milliseconds"),
        ),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid
