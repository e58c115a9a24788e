"""Voice: hear the person, answer aloud (the `charlie[voice]` extra; docs/voice.md).

The parts are importable without the extra — faster-whisper, PyAV, edge-tts and Piper are
imported only when first used, and their absence is a `VoiceUnavailable` error that says
what to install. The rest of the core never imports this package; front ends (the web app,
the CLI) do.
"""
