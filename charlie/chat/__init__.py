"""A chat turn: the reply, the tool loop, distillation on cadence, and the events
front ends show."""
