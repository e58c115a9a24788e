"""The type of a JSON value — what `json.loads` gives back and `json.dumps` writes — for
the data Charlie reads from or writes to JSON and only passes on or checks."""

from typing import TypeAlias

JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
JSONObject: TypeAlias = dict[str, JSON]
