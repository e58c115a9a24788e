"""A start-over: the memory begun again, when a person asks for it plainly.

No word in a conversation ever starts a memory over ("don't forget the float" is not a
request to forget). A person asks for it by name — `charlie memory start-over`, `/start-over`
in a chat, `POST /api/channels/{channel}/memory/start-over` — and it is one revision, undone
in one step (`charlie memory undo`). The summary and the quotes are emptied, every decision
moves to the earlier decisions (changed by hand, today), the person's own sections stay, and
the messages said before it are not folded in again.
"""

from __future__ import annotations

from dataclasses import dataclass

from charlie import conversations
from charlie.conversations import Channel
from charlie.db import now
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.memory.layers import Earlier, Memory

SOURCE = "start_over"  # the revision's source, as the history shows it


@dataclass(frozen=True)
class StartedOver:
    revision: memory.Revision
    retired: int  # decisions moved to the earlier ones

    def said(self, channel: Channel, undo: str) -> str:
        """What a front end tells the person, with how to undo it (`undo`)."""
        plural = "decision" if self.retired == 1 else "decisions"
        return (
            f"The memory of {channel.label} starts over: {self.retired} {plural} moved to "
            f"Earlier decisions, the summary and the quotes emptied. To undo it: {undo}."
        )


def start_over(home: Home, channel: Channel) -> StartedOver:
    """Begin the channel's memory again, as one revision that `memory.undo` takes back."""
    day = now()[:10]
    with memory.writing(home):
        if not channel.private:
            memory.sync_hand_edits(home, channel)
        current = memory.load(home, channel)
        retired = [
            Earlier(d.text, d.since, d.by, d.sources, until=day, changed_by=None)
            for d in current.decisions
        ]
        fresh = Memory(
            preamble=current.preamble,
            extra=current.extra,
            earlier=[*current.earlier, *retired],
            charlie_sentences=[],
        )
        revision = memory.save(home, channel, fresh, SOURCE)
        pending = conversations.undistilled(home, channel)
        if pending:  # what was said before is not folded in again
            conversations.mark_distilled(home, channel, max(m.id for m in pending))
    return StartedOver(revision, len(retired))
