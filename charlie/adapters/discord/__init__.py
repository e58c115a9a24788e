"""The Discord bot (the `charlie[discord]` extra): server channels bound to projects, DMs
as each person's private channel. Only `bot` imports discord.py; see docs/discord.md."""
