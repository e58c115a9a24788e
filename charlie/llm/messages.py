"""The shapes Charlie sends an OpenAI-compatible chat server: chat messages with their
content parts and tool calls, the tool schemas offered, and the request body.

They are `TypedDict`s, so the dicts that go on the wire are the ones mypy checks.
"""

from collections.abc import Mapping
from typing import Required, TypedDict

from charlie.jsonvalue import JSON


class ImageURL(TypedDict):
    url: str


class ContentPart(TypedDict, total=False):
    """One part of a message's content: `{"type": "text", "text": …}` or an image."""

    type: Required[str]
    text: str
    image_url: ImageURL


class FunctionCall(TypedDict):
    """The `function` of a tool call: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str


class ToolCallPart(TypedDict):
    """One entry of an assistant message's `tool_calls`."""

    id: str
    type: str  # "function"
    function: FunctionCall


class ChatMessage(TypedDict, total=False):
    """An OpenAI-style chat message: system, user, assistant or tool."""

    role: Required[str]
    content: str | list[ContentPart] | None
    tool_calls: list[ToolCallPart]
    tool_call_id: str  # a tool result's answer to that call


class ParameterSchema(TypedDict, total=False):
    """The JSON Schema of one argument of a tool."""

    type: Required[str]
    description: str
    default: JSON
    enum: list[str]
    items: "ParameterSchema"


class ParametersSchema(TypedDict, total=False):
    """The JSON Schema of a tool's arguments: an object of named ones (Charlie's own tools
    give `properties` and `required` always; a schema from elsewhere may leave them out)."""

    type: Required[str]  # "object"
    properties: dict[str, ParameterSchema]
    required: list[str]


class FunctionSchema(TypedDict, total=False):
    name: Required[str]
    description: str
    parameters: ParametersSchema


class ToolSchema(TypedDict):
    """A tool offered to the model: `{"type": "function", "function": {…}}`."""

    type: str
    function: FunctionSchema


class ChatRequest(TypedDict, total=False):
    """The body of a `/chat/completions` request."""

    model: Required[str]
    messages: Required[list[ChatMessage]]
    stream: bool
    stream_options: dict[str, bool]
    tools: list[ToolSchema]
    response_format: Mapping[str, object]  # a JSON Schema the answer is held to
    temperature: float
    max_tokens: int
    chat_template_kwargs: dict[str, bool]
